//! The prelude's macros, as a user writes them.

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
