"""HTTPS: the TLS settings a server serves with (`openddb serve --tls-cert FILE --tls-key FILE`).

TLS is done by the event loop's transport (the standard library's ssl module under uvloop), on the same workers
and the same HTTP/1.1 keep-alive framing as plain HTTP. TLS 1.2 at least, as every AWS API endpoint since June 2023
(AWS Security Blog, "TLS 1.2 to become the minimum TLS protocol level for all AWS API endpoints", 2022-06-28).
`openddb cert` (openddb.certificates) makes a pair to serve with.
"""

from __future__ import annotations

import ssl


class TlsSetupError(Exception):
    """The certificate or key cannot be used (the message says why, in one line)."""


def server_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    """A server-side TLS context for the certificate chain in `cert_file` and its private key in `key_file`."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    try:
        context.load_cert_chain(cert_file, key_file)
    except FileNotFoundError as error:
        raise TlsSetupError(f"--tls-cert/--tls-key: {error.filename}: no such file") from None
    except (ssl.SSLError, OSError) as error:
        raise TlsSetupError(f"--tls-cert {cert_file} / --tls-key {key_file} cannot be used: "
                            f"{getattr(error, 'reason', None) or error}") from None
    return context
