/* Working HMAC-SHA256 for the PyPI-built Mesos 1.11 of ../shared/mesos-local.
 *
 * That build links OpenSSL 1.0 symbols which ../shared/mesos-local replaces with abort-if-called
 * stubs. An agent started with --authenticate_http_executors signs and checks each executor's JWT
 * with HMAC(EVP_sha256(), ...) and aborts in the stub. scripts/mesos-local.sh appends this file to
 * the generated stub source (after removing the stubs of these symbols) so that the four calls
 * the JWT code makes reach Debian's OpenSSL 3, whose HMAC(), EVP_sha256(), EVP_sha1() and
 * SHA256() keep the 1.0 signatures. libcrypto.so.3 is opened privately (RTLD_LOCAL) so that its
 * own versioned symbols never interpose on the stub library's. */
#include <dlfcn.h>
#include <stddef.h>

static void *dlc_crypto3_symbol(const char *name) {
    static void *handle;
    if (handle == NULL) handle = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) die("dlopen(libcrypto.so.3)");
    void *found = dlsym(handle, name);
    if (found == NULL) die(name);
    return found;
}

const void *EVP_sha256(void) {
    return ((const void *(*)(void))dlc_crypto3_symbol("EVP_sha256"))();
}

const void *EVP_sha1(void) {
    return ((const void *(*)(void))dlc_crypto3_symbol("EVP_sha1"))();
}

unsigned char *HMAC(const void *md, const void *key, int key_len, const unsigned char *data,
                    size_t data_len, unsigned char *out, unsigned int *out_len) {
    typedef unsigned char *(*hmac_fn)(const void *, const void *, int, const unsigned char *,
                                      size_t, unsigned char *, unsigned int *);
    return ((hmac_fn)dlc_crypto3_symbol("HMAC"))(md, key, key_len, data, data_len, out, out_len);
}

unsigned char *SHA256(const unsigned char *data, size_t len, unsigned char *out) {
    typedef unsigned char *(*sha_fn)(const unsigned char *, size_t, unsigned char *);
    return ((sha_fn)dlc_crypto3_symbol("SHA256"))(data, len, out);
}
