;; The host's own glue: how oml compiles Fennel, and where `require` finds `.fnl` modules.
;;
;; Compiled to bytecode by build.rs like the rest of the prelude; `Lisp::boot` (src/lisp/mod.rs)
;; runs it once, after Fennel and before core.fnl, and keeps the table it returns. It knows
;; nothing about what the compiled code does.

(local fennel (require :fennel))

(fn without-cwd [path]
  "PATH (a `;`-separated search path) without the entries relative to the working directory
(`./?.lua`, `./?.fnl`): a `require` that misses oml's load path must not load a file a command
wrote into the workspace, unconfined."
  (table.concat (icollect [entry (path:gmatch "[^;]+")]
                  (when (not (entry:find "^%./")) entry))
                ";"))

(set package.path (without-cwd package.path))
(set package.cpath (without-cwd package.cpath))
(set fennel.path (without-cwd fennel.path))
(set fennel.macro-path (without-cwd fennel.macro-path))

(fn compile [src filename scope]
  "Compile the Fennel text SRC (named FILENAME) to Lua with the options every oml file uses:
metadata on (docstrings for `doc`), Lua lines kept equal to Fennel lines (so errors and `source`
point at the right line), and a fresh child of SCOPE, the scope that holds oml's macros. Returns
the Lua source; raises Fennel's parse or compile error."
  (fennel.compileString src {: filename :correlate true :useMetadata true
                             :scope (fennel.scope scope)
                             ;; No terminal escape codes around the offending form: these
                             ;; messages reach log files, editors (as ACP text) and test output.
                             :error-pinpoint false}))

(fn add-load-path [dir ?within]
  "Put DIR on `oml.load-path`, the module search path and the macro search path, once. A
module found there is loaded only when its real path lies inside ?WITHIN (default DIR): the
project root for a project's `.oml/lisp`, oml's config folder for the user's `lisp/`."
  (let [oml _G.oml]
    (when (= nil oml.load-path) (set oml.load-path []))
    (when (= nil oml.load-path-within) (set oml.load-path-within {}))
    (when (= nil (. oml.load-path-within dir)) (tset oml.load-path-within dir (or ?within dir)))
    (when (not (accumulate [seen false _ d (ipairs oml.load-path)] (or seen (= d dir))))
      (table.insert oml.load-path dir)
      (set fennel.path (.. dir "/?.fnl;" dir "/?/init.fnl;" fennel.path))
      (set fennel.macro-path (.. dir "/?.fnl;" dir "/?/init-macros.fnl;" dir "/?/init.fnl;"
                                 fennel.macro-path)))))

(fn find-module [rel]
  "The first DIR/REL.fnl or DIR/REL/init.fnl that exists, DIR taken from `oml.load-path`, and
the folder it must stay in (`add-load-path`)."
  (var found nil)
  (var within nil)
  (each [_ dir (ipairs (or _G.oml.load-path [])) &until found]
    (each [_ candidate (ipairs [(.. dir "/" rel ".fnl") (.. dir "/" rel "/init.fnl")])
           &until found]
      (let [f (io.open candidate :r)]
        (when f
          (f:close)
          (set found candidate)
          (set within (or (. (or _G.oml.load-path-within {}) dir) dir))))))
  (values found within))

(fn install-searcher [compile-file]
  "Add a `package.searchers` entry that finds `.fnl` modules on `oml.load-path` and compiles them
with COMPILE-FILE (the host's, which uses the cache, and refuses a file whose real path leaves
the folder it must stay in): it returns the chunk, or nil and a message."
  (fn searcher [name]
    (let [(path within) (find-module (pick-values 1 (name:gsub "%." "/")))]
      (if path
          (let [(chunk err) (compile-file path within)]
            (when (not chunk) (error err 0))
            (values chunk path))
          (.. "\n\tno file on oml's load path for '" name "'"))))
  (table.insert package.searchers 2 searcher))

(fn keep-children-off-stdout []
  "Where stdout belongs to a protocol or an answer (`oml acp`, print mode): run the commands of
`os.execute`, and of `io.popen` in write mode, with their stdout sent to stderr (`1>&2`), as
`print` and `io.write` already are. `io.popen` in read mode keeps its pipe."
  (let [execute os.execute
        popen io.popen
        off-stdout (fn [cmd] (.. "{ " cmd "\n} 1>&2"))]
    (set os.execute (fn [?cmd]
                      (if (= nil ?cmd) (execute) (execute (off-stdout ?cmd)))))
    (set io.popen (fn [cmd ?mode]
                    (if (= :r (string.sub (or ?mode :r) 1 1))
                        (popen cmd ?mode)
                        (popen (off-stdout cmd) ?mode))))))

{: compile :add-load-path add-load-path :install-searcher install-searcher
 :keep-children-off-stdout keep-children-off-stdout}
