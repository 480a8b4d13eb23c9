//! Part `checkpoint` of the headline benchmark: what keeping files for `/rewind` costs on the
//! path a user walks. A yolo-mode ACP turn whose `edit` changes one line of a 100 KB file, with
//! checkpoints on and off (`checkpoint.max-bytes` 0) in the same binary, the difference being
//! the cost per edited file; the same for a turn whose `bash` command changes a file in the git
//! work tree (`checkpoint.commands?`); and the store and session file after `HUNDRED` such
//! edits in one session.
//!
//! A binary without checkpoints (an older baseline) measures the same turns; its on/off
//! difference is noise around zero. It knows the scripted replies, not the table.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::client::{Agent, Home};
use crate::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use crate::{Figure, Sizes, median, mib, ms};

/// The edited file's size.
const FILE_BYTES: usize = 100 * 1024;
/// Turns of the store-size figure.
const HUNDRED: usize = 100;
/// Turns before the timed ones.
const WARM_UP: usize = 2;

/// The edited file: 100 KB of text ending in the line `version: 000000`.
fn big_file() -> String {
    let line = "a line of text in a file of a hundred kilobytes, padded....\n";
    let mut text = line.repeat(FILE_BYTES / line.len());
    text.push_str(&version(0));
    text
}

fn version(n: usize) -> String {
    format!("version: {n:06}\n")
}

/// Queue a turn whose tool call is `tool` with `args`, then a short answer.
fn push_turn(fake: &FakeModel, tool: &str, args: Value) {
    fake.push(Reply::from(tool_call_chunks(
        "c1",
        tool,
        &[&args.to_string()],
    )));
    fake.push(Reply::from(text_chunks(&["done"])));
}

/// `oml acp` in a home whose init file sets `init`, with a yolo session.
fn agent(home: &Home, bin: &Path, fake: &FakeModel, init: &str) -> (Agent, String) {
    // No compaction: the turns only change files.
    let init = format!("(setq agent.compact-at 0)\n{init}");
    std::fs::write(home.root.join("config/oml/init.fnl"), init).expect("init");
    std::fs::write(home.project.join("big.txt"), big_file()).expect("big file");
    let mut agent = Agent::spawn(home, bin, Some(fake));
    agent.initialize();
    let sid = agent.new_session(&home.project);
    let id = agent.request(
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "yolo"}),
    );
    agent.until_response(id);
    (agent, sid)
}

/// One prompt's whole time.
fn turn(agent: &mut Agent, sid: &str) -> Duration {
    let start = Instant::now();
    let id = agent.prompt(sid, "change it");
    let answer = agent.until_response(id);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    start.elapsed()
}

/// The median turn, over `runs` after the warm-up, of turns that each call `tool` with the
/// arguments `args(n)`, under the init file `init`.
fn timed(bin: &Path, runs: usize, init: &str, tool: &str, args: fn(usize) -> Value) -> Duration {
    let home = Home::new();
    let fake = FakeModel::start(Vec::<Reply>::new());
    let (mut agent, sid) = agent(&home, bin, &fake, init);
    let mut times = Vec::new();
    for n in 0..WARM_UP + runs {
        push_turn(&fake, tool, args(n));
        let t = turn(&mut agent, &sid);
        if n >= WARM_UP {
            times.push(t);
        }
    }
    median(&times)
}

fn edit_args(n: usize) -> Value {
    json!({"path": "big.txt", "old_text": version(n), "new_text": version(n + 1)})
}

fn bash_args(n: usize) -> Value {
    json!({"command": format!("echo {n} >> README.md")})
}

const OFF: &str = "(setq checkpoint.max-bytes 0)\n";
const COMMANDS_ON: &str = "(setq checkpoint.commands? true)\n";

/// Part `checkpoint`.
pub fn checkpoint(bin: &Path, sizes: &Sizes) -> Vec<Figure> {
    let runs = sizes.runs;
    let on = timed(bin, runs, "", "edit", edit_args);
    let off = timed(bin, runs, OFF, "edit", edit_args);
    let bash_on = timed(bin, runs, COMMANDS_ON, "bash", bash_args);
    let bash_off = timed(bin, runs, "", "bash", bash_args);
    let (store, session) = hundred_turns(bin, if sizes.runs > 1 { HUNDRED } else { 3 });
    vec![
        Figure::new("turn editing a 100 KB file, checkpoints on", "ms", "").of(ms(on)),
        Figure::new("  the same, checkpoints off", "ms", "").of(ms(off)),
        Figure::new("  checkpoint cost per 100 KB file (on - off)", "ms", "<= 1")
            .of(ms(on) - ms(off)),
        Figure::new(
            "turn whose bash changes a tracked file, commands on",
            "ms",
            "",
        )
        .of(ms(bash_on)),
        Figure::new("  checkpoint cost of the command (2 git status)", "ms", "")
            .of(ms(bash_on) - ms(bash_off)),
        Figure::new("store after 100 turns editing 100 KB", "MiB", "").of(mib(store)),
        Figure::new("  its session file", "MiB", "").of(mib(session)),
    ]
}

/// The bytes of the checkpoint store and of the session file after `turns` turns that each
/// edit one line of the 100 KB file.
fn hundred_turns(bin: &Path, turns: usize) -> (f64, f64) {
    let home = Home::new();
    let fake = FakeModel::start(Vec::<Reply>::new());
    let (mut agent, sid) = agent(&home, bin, &fake, "");
    for n in 0..turns {
        push_turn(&fake, "edit", edit_args(n));
        turn(&mut agent, &sid);
    }
    drop(agent);
    let state = home.root.join("state/oml");
    (
        folder_bytes(&state.join("checkpoints")),
        folder_bytes(&state.join("sessions")),
    )
}

fn folder_bytes(dir: &Path) -> f64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0.0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => folder_bytes(&e.path()),
            Ok(m) => m.len() as f64,
            Err(_) => 0.0,
        })
        .sum()
}
