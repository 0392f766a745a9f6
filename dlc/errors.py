"""One error hierarchy for DLC.

Catch :class:`DlcError` to catch everything DLC raises on purpose. The CLI turns
every ``DlcError`` into a one-line ``Error: ...`` message and a non-zero exit code;
anything else escaping to the user is a bug.

Each subclass carries the facts a caller needs (line numbers, ids) as attributes
so that programs do not have to parse messages.
"""

from __future__ import annotations


class DlcError(Exception):
    """Base class of every error DLC raises deliberately."""

    #: exit code the CLI uses for this error class
    exit_code = 1


class FieldError(DlcError):
    """Invalid user input that can be pinned on one field, option or setting.

    The message reads ``<field>: <what was wrong and how to fix it>``; usage-type errors
    exit with code 2, as click's do.

    Attributes:
        field: the offending field, option or setting.
    """

    exit_code = 2

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(f"{field}: {message}")


class TopologyParseError(DlcError):
    """Topology text (``nvidia-smi topo -m`` / ``-p2p``) could not be parsed.

    Attributes:
        line: 1-based line number of the offending line, or ``None`` when the
            problem is not tied to one line (e.g. empty input).
        expected: what the parser expected to find there.
    """

    def __init__(self, message: str, line: int | None = None, expected: str | None = None):
        self.line = line
        self.expected = expected
        where = f"line {line}: " if line is not None else ""
        hint = f" (expected {expected})" if expected else ""
        super().__init__(f"{where}{message}{hint}")


class TopologyEncodingError(DlcError):
    """A compact topology encoding (agent attribute) is malformed."""


class NodeConfigError(FieldError):
    """Agent configuration input (``dlc node-config`` options) is invalid.

    Attributes:
        field: the offending option, e.g. ``"cpus"``.
    """


class DiscoveryError(DlcError):
    """The GPUs of this host could not be discovered (no NVML, no nvidia-smi)."""


class TopologyQueryError(DlcError):
    """A topology-tree query named a GPU or tree node the machine does not have."""


class AllocationError(DlcError):
    """No GPU set satisfies a request.

    Attributes:
        reason: short machine-readable reason, e.g. ``"too_few_free"``,
            ``"model_mismatch"``, ``"required_not_free"``.
    """

    def __init__(self, message: str, reason: str = "unsatisfiable"):
        self.reason = reason
        super().__init__(message)


class ConfigError(FieldError):
    """A scheduler setting (``dlc scheduler``/``dlc local`` option) is invalid.

    Attributes:
        field: the offending setting, e.g. ``"policy"``.
    """


class OfferError(DlcError):
    """A Mesos offer is malformed or cannot be used."""


class ResourceSyntaxError(DlcError):
    """A mesos-agent ``--resources``/``--attributes`` string is malformed.

    Attributes:
        flag: ``"resources"`` or ``"attributes"``.
        item: the offending ``name:value`` item.
    """

    exit_code = 2

    def __init__(self, flag: str, item: str, message: str):
        self.flag = flag
        self.item = item
        super().__init__(f"--{flag} item {item!r}: {message}")


class EmulatorError(DlcError):
    """The in-process Mesos emulator was misconfigured or could not start."""


class JobSpecError(FieldError):
    """A job specification (CLI flags or YAML) is invalid.

    Attributes:
        field: the offending field, e.g. ``"gpus"`` or ``"framework"``.
    """


class TenancyError(JobSpecError):
    """A bad group, quota or limit setting (names the field and the fix)."""


class ImageNotFound(DlcError):
    """A framework/version is not in the image catalog."""


class ContainerError(DlcError):
    """The Docker engine refused or failed an operation."""


class LimitReached(DlcError):
    """A per-user cap (queued jobs, requests) is reached; the API answers 429."""


class JobNotFound(DlcError):
    """No job with that id is visible to the caller."""


class ApiError(DlcError):
    """The DLC scheduler API answered with an error."""


class ProbeError(DlcError):
    """The native P2P probe could not be built, run, or its output read."""


class ProbeOutputError(ProbeError):
    """The probe's JSON output is malformed.

    Attributes:
        field: JSON path of the offending field, e.g. ``"pairs[3].uni_gbps_p2p"``.
    """

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(f"probe JSON: {field}: {message}")


class ProbeRunError(ProbeError):
    """The probe ran and reported a failure (no GPU, no driver, a CUDA call failed).

    Attributes:
        code: the probe's exit code (1 CUDA error, 2 usage, 3 no device, 4 no driver).
        kind: the probe's error kind (``"no_device"``, ``"no_driver"``, ...).
    """

    def __init__(self, message: str, code: int, kind: str):
        self.code = code
        self.kind = kind
        super().__init__(message)


class OutputError(DlcError):
    """A requested output (``--svg``/``--png``/``--json`` file) could not be written."""


class StoreError(DlcError):
    """The job database cannot be used: damaged, full, locked, read-only, or from a newer DLC.

    Nothing was written when it is raised (the write's transaction was rolled back), so
    a caller that has not acknowledged anything yet (a Mesos status update) may simply
    let it propagate: the update is re-sent.

    Attributes:
        path: the database file.
        kind: ``"damaged"``, ``"full"``, ``"locked"``, ``"read_only"``, ``"io"``,
            ``"schema"`` (written by a newer DLC), ``"in_use"`` (another scheduler holds
            it), ``"unavailable"`` (the database server cannot be reached: PostgreSQL),
            ``"fenced"`` (this scheduler lost its leadership: HA) or ``"other"``.
    """

    def __init__(self, message: str, path: str = "", kind: str = "other"):
        self.path = path
        self.kind = kind
        super().__init__(message)

    @property
    def transient(self) -> bool:
        """True when retrying later may succeed (full disk, lock, I/O error)."""
        return self.kind in ("full", "locked", "io", "unavailable")
