//! `oml acp --listen` in a test home: started on a free loopback port, its URL and token file
//! read from its stdout, killed when dropped.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Stdio};

use super::fake_model::FakeModel;
use super::home::Env;

/// A running `oml acp --listen`, killed on drop.
pub struct Listener {
    child: Child,
    pub url: String,
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
        let token_file = PathBuf::from(line("token-file "));
        Listener {
            child,
            url,
            token_file,
        }
    }

    pub fn addr(&self) -> String {
        let rest = self.url.strip_prefix("http://").unwrap();
        rest.strip_suffix("/acp").unwrap().to_owned()
    }

    pub fn token(&self) -> String {
        std::fs::read_to_string(&self.token_file)
            .unwrap()
            .trim()
            .to_owned()
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
