//! The prelude's macros and the host's print capture, as a user writes them.

use oml::lisp::{Lisp, LispOptions, Output};

fn host() -> Lisp {
    Lisp::new(LispOptions {
        output: Output::Stderr,
        cache_dir: None,
    })
    .expect("the Lisp host starts")
}

#[tokio::test]
async fn setq_sets_several_settings_in_one_form() {
    let lisp = host();
    let src = r#"
        (defsetting my.mode :fast [:fast :careful] "How hard to try.")
        (defsetting my.limit 10 :integer "How many.")
        (setq my.mode :careful
              my.limit 20)
        [my.mode my.limit]
    "#;
    let text = lisp
        .eval_to_string(src, "test", &oml::cancel::CancelToken::new())
        .await
        .expect("evaluates");
    assert_eq!(text, r#"["careful" 20]"#);
}

/// What a coroutine prints between `oml.capture-begin` and `oml.capture-end` is kept, not
/// written, also across a wait that suspends it; a capture inside another gives its own text
/// and puts the outer one back.
#[tokio::test]
async fn print_is_captured_across_a_yield_and_captures_nest() {
    let lisp = host();
    let src = r#"
        (let [outer (oml.capture-begin)]
          (print "a" 1)
          (oml.sleep 1)
          (let [inner (oml.capture-begin)]
            (print "inner")
            (let [inner-text (oml.capture-end inner)]
              (print "b")
              (let [both (.. inner-text "|" (oml.capture-end outer))
                    shown (both:gsub "\n" "/")]
                (pick-values 1 (shown:gsub "\t" "_"))))))
    "#;
    let text = lisp
        .eval_to_string(src, "test", &oml::cancel::CancelToken::new())
        .await
        .expect("evaluates");
    assert_eq!(text, r#""inner/|a_1/b/""#);
}
