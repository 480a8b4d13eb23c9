;; The macros every oml Lisp file sees without importing anything.
;;
;; This is a Fennel macro module: its chunk returns a table of macros that the host installs in
;; the scope every file, REPL form and /eval is compiled in. The macros only turn names written
;; as symbols (`agent.max-turns`) into strings and call the functions of `oml` (core.fnl), which
;; do the work at run time; so a macro never needs recompiling when the surface changes.

(fn name-of [x what]
  (if (sym? x) (tostring x)
      (= :string (type x)) x
      (error (.. what ": expected a name such as agent.max-turns, got " (tostring x)))))

(fn no-tail [call]
  "CALL bound to a local and returned, rather than returned directly. A call in tail position is
a Lua tail call, which leaves no frame for an error raised with a level to point at: a bad `setq`,
`defsetting` or `advise!` as the last form of an init file (or of a function) would be reported
without its line."
  (let [v (sym :oml-result)]
    (list (sym :let) (sequence v call) v)))

(fn setq [...]
  "Set settings by name, validating each value: (setq llm.model \"gpt-4o-mini\" agent.max-turns 50)."
  (let [n (select :# ...)
        call (list (sym :_G.oml.setq*))]
    (when (or (= n 0) (not= 0 (% n 2)))
      (error "setq: expected name/value pairs, e.g. (setq agent.max-turns 50)"))
    (for [i 1 n 2]
      ;; `let` keeps one value of each `select`; `select` alone returns every value from there on.
      (let [name (select i ...)
            value (select (+ i 1) ...)]
        (table.insert call (name-of name "setq"))
        (table.insert call value)))
    (no-tail call)))

(fn defsetting [name default typ doc ...]
  "Declare a setting: (defsetting my.limit 200 :integer \"How many lines to keep.\")."
  (let [src (ast-source name)
        opts {:type typ :doc doc :file src.filename :line src.line}]
    (for [i 1 (select :# ...) 2]
      (tset opts (select i ...) (select (+ i 1) ...)))
    (no-tail (list (sym :_G.oml.defsetting*) (name-of name "defsetting") default opts))))

(fn advise! [target key f]
  "Wrap the function named TARGET with around-advice F, called as (f original ...args)."
  (no-tail (list (sym :_G.oml.advise*) (name-of target "advise!") key f)))

(fn unadvise! [target ?key]
  "Remove the advice KEY from TARGET, or all of its advice when KEY is omitted."
  (list (sym :_G.oml.unadvise*) (name-of target "unadvise!") ?key))

(fn advice-keys [target]
  "The keys of TARGET's advice, innermost first."
  (list (sym :_G.oml.advice-keys*) (name-of target "advice-keys")))

(fn describe [target]
  "The documentation of a function, setting or table, as a string."
  (list (sym :_G.oml.describe) (name-of target "describe")))

(fn doc [target]
  "Print the documentation of a function, setting or table: (doc agent.max-turns)."
  (list (sym :_G.oml.print-doc) (name-of target "doc")))

(fn source [target]
  "Print where TARGET is defined and its source text."
  (list (sym :_G.oml.print-source) (name-of target "source")))

{: setq : defsetting : advise! : unadvise! : advice-keys : describe : doc : source}
