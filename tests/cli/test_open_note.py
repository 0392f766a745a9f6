"""`dlc open` says when its URL bypasses the API's TLS (docs/install.md, section 7)."""

from dlc.cli.open_cmd import plain_http_note


def test_plain_http_environment_behind_an_https_api_gets_a_note():
    note = plain_http_note("https://dlc.example.org", "http://198.51.100.2:31005/lab?token=x")
    assert note and "plain HTTP" in note and "\n" not in note
    assert plain_http_note("http://198.51.100.3:8642", "http://198.51.100.2:31005/lab") is None
