//! The daemon over TLS: the gRPC listener and the status page with a
//! certificate, mutual TLS in place of a token, and settings that cannot
//! work refused at start naming what is wrong. The certificates are test
//! ones (tests/data/tls, a CA valid to 2126; see its README).

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cuzk::daemon::client::{ClientTls, connect, connect_with};
use cuzk::daemon::proto;
use cuzk::daemon::{Listen, Running, start};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;

fn pem(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/tls")
        .join(name)
}

fn config(listen: &str) -> cuzk::config::Config {
    let mut c = common::config("single_lock");
    c.daemon.listen = listen.into();
    c.daemon.tls_cert = Some(pem("server.pem"));
    c.daemon.tls_key = Some(pem("server.key"));
    c
}

fn port(r: &Running) -> u16 {
    match r.listen {
        Listen::Tcp(a) => a.port(),
        Listen::Unix(_) => unreachable!("TCP"),
    }
}

fn trusting(ca: &str) -> ClientTls {
    ClientTls {
        ca: pem(ca),
        identity: None,
    }
}

async fn status_ok(addr: &str, tls: &ClientTls) -> bool {
    match connect_with(addr, None, Some(tls)).await {
        Ok(mut c) => c.get_status(proto::GetStatusRequest {}).await.is_ok(),
        Err(_) => false,
    }
}

/// GET /status over TLS with a client trusting `ca`: the response's first line.
async fn get_status_page(port: u16, ca: &str) -> String {
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_file_iter(pem(ca)).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let Ok(mut s) = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
    else {
        return "handshake refused".into();
    };
    s.write_all(b"GET /status HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut out = vec![];
    let _ = s.read_to_end(&mut out).await;
    String::from_utf8_lossy(&out)
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_serves_tls_and_refuses_plain_text_and_strangers() {
    let mut c = config("127.0.0.1:0");
    c.daemon.status_listen = Some("127.0.0.1:0".parse().unwrap());
    let running = start(c, cuzk::EngineOptions::default()).await.unwrap();
    let p = port(&running);
    for host in ["localhost", "127.0.0.1"] {
        assert!(
            status_ok(&format!("https://{host}:{p}"), &trusting("ca.pem")).await,
            "a client trusting the CA is served at {host}"
        );
    }
    assert!(
        !status_ok(&format!("https://127.0.0.1:{p}"), &trusting("other-ca.pem")).await,
        "a client trusting another CA refuses the daemon"
    );
    let plain = match connect(&format!("127.0.0.1:{p}"), None).await {
        Ok(mut c) => c.get_status(proto::GetStatusRequest {}).await.is_ok(),
        Err(_) => false,
    };
    assert!(!plain, "plain text gets no answer from a TLS listener");
    let err = connect(&format!("https://127.0.0.1:{p}"), None)
        .await
        .map(|_| ())
        .unwrap_err();
    assert!(format!("{err:#}").contains("--tls-ca"), "{err:#}");
    // The status page serves the same certificate.
    let web = running.status.unwrap().port();
    assert_eq!(get_status_page(web, "ca.pem").await, "HTTP/1.1 200 OK");
    assert_eq!(
        get_status_page(web, "other-ca.pem").await,
        "handshake refused"
    );
    running.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_admit_a_remote_client_without_a_token() {
    // Beyond loopback with no token and no allow_from: client certificates
    // are the authentication.
    let mut c = config("0.0.0.0:0");
    c.daemon.tls_client_ca = Some(pem("ca.pem"));
    let running = start(c, cuzk::EngineOptions::default()).await.unwrap();
    let addr = format!("https://localhost:{}", port(&running));
    let mut client = trusting("ca.pem");
    assert!(
        !status_ok(&addr, &client).await,
        "no client certificate, no answer"
    );
    client.identity = Some((pem("stranger.pem"), pem("stranger.key")));
    assert!(
        !status_ok(&addr, &client).await,
        "a certificate from another CA, no answer"
    );
    client.identity = Some((pem("client.pem"), pem("client.key")));
    assert!(
        status_ok(&addr, &client).await,
        "a certificate from the CA is served"
    );
    running.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_settings_that_cannot_work_are_refused_naming_them() {
    let refused = |c: cuzk::config::Config| async move {
        let err = start(c, cuzk::EngineOptions::default())
            .await
            .map(|_| ())
            .unwrap_err();
        format!("{err:#}")
    };
    let mut c = config("127.0.0.1:0");
    c.daemon.tls_key = None;
    let e = refused(c).await;
    assert!(
        e.contains("daemon.tls_cert is set but daemon.tls_key is not"),
        "{e}"
    );
    let mut c = config("127.0.0.1:0");
    c.daemon.tls_key = Some(pem("client.key"));
    let e = refused(c).await;
    assert!(
        e.contains("daemon.tls_key") && e.contains("is not the key of the certificate"),
        "{e}"
    );
    let mut c = config("127.0.0.1:0");
    c.daemon.tls_cert = Some(pem("server.key"));
    let e = refused(c).await;
    assert!(
        e.contains("daemon.tls_cert") && e.contains("holds no certificate"),
        "{e}"
    );
    let mut c = config("127.0.0.1:0");
    c.daemon.tls_cert = Some(pem("missing.pem"));
    let e = refused(c).await;
    assert!(
        e.contains("daemon.tls_cert: reading") && e.contains("missing.pem"),
        "{e}"
    );
    let mut c = config("127.0.0.1:0");
    c.daemon.tls_cert = None;
    c.daemon.tls_key = None;
    c.daemon.tls_client_ca = Some(pem("ca.pem"));
    let e = refused(c).await;
    assert!(
        e.contains("daemon.tls_client_ca needs daemon.tls_cert"),
        "{e}"
    );
    let dir = tempfile::tempdir().unwrap();
    let c = config(&format!("unix://{}", dir.path().join("d.sock").display()));
    let e = refused(c).await;
    assert!(e.contains("is for a TCP listener"), "{e}");
}
