//! Part `hooks` of the headline benchmark: what hooks cost a tool call. Three `oml acp`
//! processes, each one session against the fake model, each turn an answer of `CALLS` `ls`
//! calls; the span from that request to the next (the calls, their cards, the transcript kept)
//! divided by `CALLS`:
//!
//! - with no hooks;
//! - with a Lisp `PreToolUse` and a Lisp `PostToolUse` hook (`hook.add`), each returning nil:
//!   the difference over two is one Lisp hook's cost, which the issue wants well under 0.1 ms;
//! - with a command `PreToolUse` hook in `~/.claude/settings.json` (`cat >/dev/null`): one
//!   fork/exec per call.
//!
//! A binary without hooks (an older baseline) runs the plain turns only. It knows the fixtures,
//! not the table.

use std::path::Path;

use serde_json::json;

use crate::client::{Agent, Home};
use crate::fake_model::{FakeModel, Reply, Step, delta_chunk, text_chunks};
use crate::{Figure, Sizes, median, ms};

/// `ls` calls in each timed answer.
const CALLS: usize = 20;
/// Turns before the timed ones.
const WARM_UP: usize = 2;

/// One answer with `CALLS` `ls` calls.
fn calls() -> Reply {
    let mut steps: Vec<Step> = (0..CALLS)
        .map(|i| {
            let call = json!({"index": i, "id": format!("call_{i}"), "type": "function",
                              "function": {"name": "ls", "arguments": "{\"path\": \".\"}"}});
            Step::Chunk(delta_chunk(json!({"tool_calls": [call]}), None))
        })
        .collect();
    steps.push(Step::Chunk(delta_chunk(json!({}), Some("tool_calls"))));
    Reply::from(steps)
}

/// The median span per call of `runs` timed turns in a fresh `oml acp` set up by `setup`.
fn per_call(bin: &Path, runs: usize, setup: impl FnOnce(&Home)) -> f64 {
    let home = Home::new();
    setup(&home);
    let fake = FakeModel::start(Vec::<Reply>::new());
    let mut agent = Agent::spawn(&home, bin, Some(&fake));
    agent.initialize();
    let sid = agent.new_session(&home.project);
    let mut spans = Vec::new();
    for run in 0..WARM_UP + runs {
        fake.push(calls());
        fake.push(Reply::from(text_chunks(&["Listed."])));
        let before = fake.requests().len();
        let id = agent.prompt(&sid, "go");
        agent.until_response(id);
        let arrived: Vec<_> = fake.requests()[before..]
            .iter()
            .map(|r| r.arrived)
            .collect();
        if run >= WARM_UP
            && let [a, b, ..] = arrived[..]
        {
            spans.push(b.duration_since(a));
        }
    }
    ms(median(&spans)) / CALLS as f64
}

/// Whether `bin` has hooks: it holds the name of a setting only they declare.
fn has_hooks(bin: &Path) -> bool {
    let needle = b"hook.max-stop-continues";
    std::fs::read(bin).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle))
}

/// Part `hooks`.
pub fn hooks(bin: &Path, sizes: &Sizes) -> Vec<Figure> {
    let plain = per_call(bin, sizes.runs, |_| {});
    let (lisp, command) = if has_hooks(bin) {
        let lisp = per_call(bin, sizes.runs, |home| {
            std::fs::write(
                home.root.join("config/oml/init.fnl"),
                "(hook.add :PreToolUse \"ls\" (fn [e] nil))\n(hook.add :PostToolUse \"ls\" (fn [e] nil))\n",
            )
            .expect("write init");
        });
        let command = per_call(bin, sizes.runs, |home| {
            let dir = home.root.join("home/.claude");
            std::fs::create_dir_all(&dir).expect("mkdir");
            let hooks = json!({"hooks": {"PreToolUse": [{"matcher": "LS", "hooks": [
                {"type": "command", "command": "cat >/dev/null"}]}]}});
            std::fs::write(dir.join("settings.json"), hooks.to_string()).expect("write");
        });
        (lisp, command)
    } else {
        (f64::NAN, f64::NAN)
    };
    vec![
        Figure::new("tool call, no hooks (20 per answer)", "ms", "").of(plain),
        Figure::new("one Lisp hook: (pre + post - none) / 2", "ms", "< 0.1")
            .of((lisp - plain) / 2.0),
        Figure::new("one command hook (fork/exec): with - none", "ms", "").of(command - plain),
    ]
}
