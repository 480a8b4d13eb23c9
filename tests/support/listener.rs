//! `oml acp --listen` in a test home: started on a free loopback port, its URL and the token it
//! made read from its stdout (and put in a file of the test home for the clients that read
//! one), killed when dropped.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Stdio};

use super::fake_model::FakeModel;
use super::home::Env;

/// A running `oml acp --listen`, killed on drop.
pub struct Listener {
    child: Child,
    pub url: String,
    token: String,
    /// A file of the test home holding the token.
    pub token_file: PathBuf,
}

impl Listener {
    pub fn start(env: &Env, fake: Option<&FakeModel>, extra: &[&str]) -> Listener {
        let mut args = vec!["acp", "--listen", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        let mut cmd = env.command(fake, &args);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start oml acp --listen");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = |prefix: &str| {
            let mut l = String::new();
            out.read_line(&mut l).unwrap();
            l.strip_prefix(prefix)
                .unwrap_or_else(|| panic!("expected {prefix}, got {l:?}"))
                .trim()
                .to_owned()
        };
        let url = line("listening ");
        let token = line("token ");
        let token_file = env.root.join("listener.token");
        std::fs::write(&token_file, format!("{token}\n")).expect("write the token file");
        Listener {
            child,
            url,
            token,
            token_file,
        }
    }

    pub fn addr(&self) -> String {
        let rest = self.url.strip_prefix("http://").unwrap();
        rest.strip_suffix("/acp").unwrap().to_owned()
    }

    pub fn token(&self) -> String {
        self.token.clone()
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
