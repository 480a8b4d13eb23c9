;; The REPL driver: Fennel's own `fennel.repl` with oml's macros in its scope.
;;
;; Compiled to bytecode by build.rs; src/lisp/repl.rs runs it for each REPL conversation, with
;; READ, WRITE and FAIL from Rust. It knows nothing about terminals or sockets.

(local fennel (require :fennel))

;; Fennel's REPL keeps its locals (___replLocals___) and callbacks (___repl___) in its
;; environment. With _G as that environment every REPL in the process shares them, so a second
;; client's REPL replaced the first one's locals. Each REPL gets an environment of its own that
;; reads and writes every other name in _G.
(local private {:___replLocals___ true :___repl___ true})

(fn repl-env []
  (setmetatable {} {:__index _G
                    :__newindex (fn [t k v] (if (. private k) (rawset t k v) (tset _G k v)))
                    :__pairs (fn [] (values next _G nil))}))

(fn drive [oml-scope read write fail]
  "Run `fennel.repl` until READ (called with true inside an unfinished form) returns nil. WRITE
gets the rendered values; FAIL each error as Fennel's kind, the error value itself (Rust tells an
interrupt by its type, never by its text) and its text; OML-SCOPE holds oml's macros."
  (fennel.repl
    {:env (repl-env)
     :readChunk (fn [state] (read (< 0 (or (. state :stack-size) 0))))
     :onValues (fn [xs] (when (< 0 (length xs)) (write (.. (table.concat xs "\t") "\n"))))
     :onError (fn [kind msg]
                ;; Fennel loads each input under its own Lua text as the chunk name, so an error
                ;; in a typed form would quote that text; it is called `repl` instead.
                (let [text (pick-values 1 (-> (tostring msg)
                                              (: :gsub "\nstack traceback:.*" "")
                                              (: :gsub "%[string \".-\"%]:(%d+):" "repl:%1:")))]
                  (fail kind msg text)))
     :init (fn [opts]
             (each [k v (pairs oml-scope.macros)] (tset opts.scope.macros k v)))
     :view-opts {:depth 6}
     ;; Fennel's REPL otherwise fixes the known globals when it starts, so a global defined
     ;; later (by this client, another client or Rust) would be an "unknown identifier" here.
     ;; Init files, `oml eval` and `oml run` compile without that check; the REPL does the same.
     :allowedGlobals false}))

drive
