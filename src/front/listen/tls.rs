//! TLS for `oml acp --listen`: the certificate chain and key from PEM files, served with
//! rustls on the `ring` provider (ALPN offers h2 and http/1.1). It knows files and rustls, not
//! HTTP.

use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::{ListenError, ListenOptions};

/// The acceptor for `--tls-cert` and `--tls-key`, or `None` when neither is given.
pub(super) fn acceptor(
    options: &ListenOptions,
) -> Result<Option<tokio_rustls::TlsAcceptor>, ListenError> {
    let (cert, key) = match (&options.tls_cert, &options.tls_key) {
        (None, None) => return Ok(None),
        (Some(c), Some(k)) => (c, k),
        _ => {
            return Err(ListenError::Tls(
                "give both --tls-cert and --tls-key".into(),
            ));
        }
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(Iterator::collect)
        .map_err(|e| ListenError::Tls(format!("{}: {e}", cert.display())))?;
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| ListenError::Tls(format!("{}: {e}", key.display())))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ListenError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| ListenError::Tls(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Some(tokio_rustls::TlsAcceptor::from(Arc::new(config))))
}
