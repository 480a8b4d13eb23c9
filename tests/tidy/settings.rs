//! One way to declare a setting: `defsetting` in Fennel, `SettingDecl::new` in Rust, each of
//! which records where the setting was declared.

use crate::tree::{self, File, assert_none, code, planted};

/// Where a built-in Fennel file declares a setting other than with the prelude's `defsetting`
/// macro: a helper of its own, or a direct call of `oml.defsetting*` (which only `core.fnl`,
/// where it is defined, and the macro itself may call).
fn own_setting_declarations(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with(';'))
        .filter(|l| l.contains("(fn defsetting") || l.contains("oml.defsetting*"))
        .map(|l| l.trim().to_owned())
        .collect()
}

/// The Fennel files' own ways of declaring a setting, but in the prelude's `core.fnl` and
/// `macros.fnl`, which define the one way.
fn fennel_setting_helpers(files: &[File]) -> Vec<String> {
    let mut offenders = Vec::new();
    for (rel, text) in files {
        if rel.ends_with("prelude/core.fnl") || rel.ends_with("prelude/macros.fnl") {
            continue;
        }
        for line in own_setting_declarations(text) {
            offenders.push(format!("{rel}: {line}"));
        }
    }
    offenders
}

#[test]
fn fennel_declares_settings_one_way() {
    assert_none(
        &fennel_setting_helpers(&tree::fennel_sources()),
        "declare settings with the prelude's (defsetting name default type doc)",
    );
}

#[test]
fn the_setting_check_finds_a_planted_violation() {
    let planted = "(fn defsetting [name default typ doc]\n  (oml.defsetting* name default {}))\n\
                   ;; (oml.defsetting* in a comment is fine)\n(defsetting my.limit 1 :integer \"\")";
    assert_eq!(own_setting_declarations(planted).len(), 2, "{planted}");
}

#[test]
fn the_setting_check_spares_only_the_prelude_that_defines_the_way() {
    let direct = "(oml.defsetting* :a.b 1 {})";
    let files = planted(&[
        ("src/lisp/prelude/core.fnl", direct),
        ("src/lisp/prelude/macros.fnl", direct),
        ("src/agent/agent.fnl", direct),
    ]);
    assert_eq!(
        fennel_setting_helpers(&files),
        ["src/agent/agent.fnl: (oml.defsetting* :a.b 1 {})"]
    );
}

/// Where Rust code declares a setting other than with `SettingDecl::new` (which records where
/// it was called): a `SettingDecl { .. }` literal, or a closure of its own filling one in.
fn own_rust_setting_declarations(code: &str) -> Vec<String> {
    code.lines()
        .filter(|l| l.contains("SettingDecl {") && !l.contains("pub struct SettingDecl"))
        .map(|l| l.trim().to_owned())
        .collect()
}

/// The Rust sources' own ways of declaring a setting, but in `lisp/settings.rs`, which defines
/// `SettingDecl::new`.
fn rust_setting_literals(files: &[File]) -> Vec<String> {
    let mut offenders = Vec::new();
    for (rel, text) in files {
        if rel == "src/lisp/settings.rs" {
            continue;
        }
        for line in own_rust_setting_declarations(&code(text)) {
            offenders.push(format!("{rel}: {line}"));
        }
    }
    offenders
}

#[test]
fn rust_declares_settings_one_way() {
    assert_none(
        &rust_setting_literals(&tree::rust_sources()),
        "declare settings with SettingDecl::new(name, type, default, doc)",
    );
}

#[test]
fn the_rust_setting_check_finds_a_planted_violation() {
    let planted = "let decl = |name, line| SettingDecl {\n    name,\n    line,\n};\n\
                   SettingDecl::new(\"a.b\", \"integer\", 1, \"doc\");";
    assert_eq!(own_rust_setting_declarations(planted).len(), 1, "{planted}");
}

#[test]
fn the_rust_setting_check_spares_only_the_module_that_defines_the_way() {
    let literal = "Self(SettingDecl { name, line })";
    let files = planted(&[
        ("src/lisp/settings.rs", literal),
        ("src/bind/llm.rs", literal),
    ]);
    assert_eq!(
        rust_setting_literals(&files),
        ["src/bind/llm.rs: Self(SettingDecl { name, line })"]
    );
}
