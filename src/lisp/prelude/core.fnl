;; The core Lisp surface: namespace tables, settings, advice and introspection.
;;
;; Everything here is plain data in tables and is reached by name at call time, so user code can
;; redefine any of it. The host (src/lisp/) has already put its Rust functions in `oml` and `json`
;; before this file runs; this file knows nothing about models, tools or ACP.

(local oml _G.oml)
(local fennel (require :fennel))

;;; Namespaces

(local namespaces [:llm :agent :tools :commands :session :project :acp :client :catalog :init :repl
                   :json :skill])
(set oml.namespaces namespaces)

(each [_ ns (ipairs namespaces)]
  (when (= nil (rawget _G ns))
    (rawset _G ns {})))

;; Tables that belong to Lua or to the host, never listed by apropos.
(local hidden {:_G true :package true :string true :table true :math true :io true :os true
               :coroutine true :utf8 true :debug true :fennel true :oml true :arg true})

(fn split-name [name]
  "Split \"agent.max-turns\" into the table path and the last key."
  (let [(path key) (name:match "^(.+)%.([^.]+)$")]
    (if path (values path key) (values nil name))))

(fn walk [path]
  "The table reached from _G by the dotted PATH, or nil."
  (var t _G)
  (each [part (path:gmatch "[^.]+") &until (not= :table (type t))]
    (set t (rawget t part)))
  (when (= :table (type t)) t))

(fn oml.resolve [name]
  "The table and key that NAME (e.g. \"agent.run\") denotes, or nil when its table is missing."
  (let [(path key) (split-name name)]
    (if path
        (let [t (walk path)] (when t (values t key)))
        (values _G key))))

(fn oml.lookup [name]
  "The value named NAME, qualified or not. An unqualified name is looked up in the namespaces."
  (let [(t key) (oml.resolve name)]
    (if (and t (not= nil (. t key)))
        (values (. t key) name)
        (not (name:find "." 1 true))
        (let [ns (accumulate [hit nil _ ns (ipairs namespaces) &until hit]
                   (when (not= nil (rawget (. _G ns) name)) ns))]
          (when ns (values (rawget (. _G ns) name) (.. ns "." name)))))))

;;; Settings

(local registry {})
(set oml.settings-registry registry)

(fn type-name [v]
  (let [t (type v)]
    (if (= t :number) (if (= (math.type v) :integer) :integer :number)
        (= v json.null) :null
        t)))

(fn describe-type [spec]
  (if (= :table (type spec))
      (.. "one of " (table.concat (icollect [_ v (ipairs spec)] (fennel.view v)) ", "))
      (let [base (spec:gsub "%?$" "")
            article (if (base:match "^[aeiou]") "an " "a ")]
        (.. article base (if (spec:match "%?$") " or nil" "")))))

(fn type-ok? [spec v]
  (if (= :table (type spec))
      (accumulate [ok false _ allowed (ipairs spec)] (or ok (= v allowed)))
      (let [nilable (spec:match "%?$")
            base (spec:gsub "%?$" "")]
        (if (= nil v) (not= nil nilable)
            (= base :any) true
            (= base :number) (= :number (type v))
            (= base :integer) (and (= :number (type v)) (= v (math.floor v)))
            (= base :table) (= :table (type v))
            (= base :function) (or (= :function (type v))
                                   (and (= :table (type v)) (not= nil (. (or (getmetatable v) {}) :__call))))
            (= base (type v))))))

(fn oml.check-setting [name value]
  "nil when VALUE suits the setting NAME, else a message naming the setting and the expected type."
  (let [s (. registry name)]
    (if (= nil s) (.. "unknown setting " name)
        (not (type-ok? s.type value))
        (.. name " expects " (describe-type s.type) ", got " (type-name value)
            (if (= :string (type value)) (.. " " (fennel.view value)) ""))
        nil)))

(fn oml.set-setting! [name value ?level]
  "Validate VALUE and store it as the setting NAME; errors name the setting and the type."
  (let [problem (oml.check-setting name value)]
    (when problem (error (.. "setq: " problem) (or ?level 2)))
    (let [(t key) (oml.resolve name)]
      (tset t key value)
      value)))

(fn oml.setq* [...]
  "What `setq` expands to: set each setting NAME of the NAME VALUE pairs, validating each value
(an error names the setting). Returns the last value."
  (let [n (select :# ...)]
    (for [i 1 n 2]
      (oml.set-setting! (select i ...) (select (+ i 1) ...) 3))
    (select n ...)))

(fn oml.defsetting* [name default opts]
  "Declare the setting NAME. A setting that already exists keeps its value (reloading is
idempotent); its documentation and type are updated."
  (let [(path key) (split-name name)]
    (when (= nil path) (error (.. "defsetting: " name " needs a namespace, e.g. my." name) 2))
    (var t (walk path))
    (when (= nil t)
      ;; A user namespace such as `my` is created on first use.
      (set t {})
      (let [(parent last) (split-name path)]
        (tset (if parent (walk parent) _G) last t)))
    (let [existed (not= nil (. registry name))
          entry {: name :doc (or opts.doc "") :type (or opts.type :any) : default
                 :secret (= true opts.secret) :file opts.file :line opts.line}]
      (when (not (type-ok? entry.type default))
        (error (.. "defsetting: the default of " name " is not " (describe-type entry.type)) 2))
      (tset registry name entry)
      (when (or (not existed) (= nil (. t key)))
        (tset t key default))
      name)))

(fn oml.setting [name]
  "The current value of the setting NAME (the value is read at call time)."
  (let [(t key) (oml.resolve name)]
    (when t (. t key))))

(fn shown [entry value]
  (if (and entry.secret (not= nil value)) "<hidden>" (fennel.view value)))

(fn oml.settings-list []
  "Every declared setting as {:name :type :value :default :doc :secret}, sorted by name."
  (let [names (icollect [name (pairs registry)] name)]
    (table.sort names)
    (icollect [_ name (ipairs names)]
      (let [e (. registry name) v (oml.setting name)]
        {: name :type e.type :doc e.doc :secret e.secret
         :value (shown e v) :default (shown e e.default)}))))

(fn settings []
  "Print every setting with its value (secrets hidden)."
  (each [_ s (ipairs (oml.settings-list))]
    (print (.. s.name " = " s.value)))
  nil)
(set _G.settings settings)

;;; Advice

;; Qualified name -> {:original f :wrapper f :entries [[key f] ...]}, entries innermost first.
(local advice {})
(set oml.advice advice)

(fn call-chain [rec i ...]
  (if (= i 0)
      (rec.original ...)
      (let [entry (. rec.entries i)]
        ((. entry 2) (fn [...] (call-chain rec (- i 1) ...)) ...))))

(fn live-record [name]
  "The advice record of NAME when the table still holds its wrapper (a redefinition drops it)."
  (let [rec (. advice name)
        (t key) (oml.resolve name)]
    (if (and rec t (= (. t key) rec.wrapper))
        rec
        (do (tset advice name nil) nil))))

(fn oml.advise* [name key f]
  "What `advise!` expands to: wrap the function named NAME with the around-advice F under KEY
(replacing earlier advice with the same KEY), called as (f original ...args). Returns NAME; a
missing target or a non-function is an error."
  (when (not= :function (type f))
    (error (.. "advise!: the advice for " name " must be a function") 2))
  (let [(t k) (oml.resolve name)
        rec (live-record name)]
    (when (= nil t) (error (.. "advise!: nothing named " name) 2))
    (if rec
        (let [pos (accumulate [p nil i e (ipairs rec.entries) &until p]
                    (when (= (. e 1) key) i))]
          (if pos
              (tset rec.entries pos [key f])
              (table.insert rec.entries [key f])))
        (let [original (. t k)]
          (when (not= :function (type original))
            (error (.. "advise!: " name " is not a function") 2))
          (local new {: original :entries [[key f]]})
          (set new.wrapper (fn [...] (call-chain new (length new.entries) ...)))
          (let [meta (. fennel.metadata original)]
            (when meta (tset fennel.metadata new.wrapper meta)))
          (tset advice name new)
          (tset t k new.wrapper)))
    name))

(fn oml.unadvise* [name ?key]
  "What `unadvise!` expands to: remove the advice ?KEY of NAME, or all of it when ?KEY is nil;
without advice left, NAME holds its original function again. Returns NAME."
  (let [rec (live-record name)]
    (when rec
      (when (not= nil ?key)
        (for [i (length rec.entries) 1 -1]
          (when (= (. rec.entries i 1) ?key)
            (table.remove rec.entries i))))
      (when (or (= nil ?key) (= 0 (length rec.entries)))
        (let [(t k) (oml.resolve name)]
          (tset t k rec.original)
          (tset advice name nil))))
    name))

(fn oml.advice-keys* [name]
  "What `advice-keys` expands to: the keys of the advice of NAME, innermost first."
  (let [rec (live-record name)]
    (if rec (icollect [_ e (ipairs rec.entries)] (. e 1)) [])))

(fn oml.original [f]
  "The unadvised function behind F (F itself when it is not advised)."
  (or (accumulate [o nil _ rec (pairs advice) &until o]
        (when (= rec.wrapper f) rec.original))
      f))

;;; Introspection

(fn oml.summary [doc]
  "The first sentence of DOC's first paragraph."
  (let [para (or (: (or doc "") :match "^%s*(.-)%s*\n%s*\n") (: (or doc "") :match "^%s*(.-)%s*$"))
        para (para:gsub "%s*\n%s*" " ")]
    (or (para:match "^(.-[%.!%?])%s+%u") para)))

(fn oml.where [f]
  "File and line where the function F was defined, or nil. A function defined in Rust (marked
:oml/host in its metadata, also when a Fennel wrapper carries it) has none."
  (let [f (oml.original f)
        info (debug.getinfo f :S)]
    (when (and info (= "@" (info.source:sub 1 1)) (not (fennel.metadata:get f :oml/host)))
      (values (info.source:sub 2) info.linedefined))))

(fn fn-doc [f]
  (let [f (oml.original f)]
    (values (fennel.metadata:get f :fnl/docstring) (fennel.metadata:get f :fnl/arglist))))

(fn oml.describe [name]
  "The documentation of NAME (a function, a setting or a table) as a string."
  (let [(v full) (oml.lookup name)
        full (or full name)
        s (. registry full)
        out []]
    (if s
        (do
          (table.insert out (.. full "  (setting, " (describe-type s.type) ")"))
          (when (not= "" s.doc) (table.insert out (.. "  " (s.doc:gsub "\n" "\n  "))))
          (table.insert out (.. "  Value: " (shown s v)))
          (table.insert out (.. "  Default: " (shown s s.default)))
          (when s.file (table.insert out (.. "  Defined in " s.file ":" (or s.line "?")))))
        (= :function (type v))
        (let [(d args) (fn-doc v)
              keys (oml.advice-keys* full)
              (file line) (oml.where v)]
          (table.insert out (.. "(" full (if (and args (< 0 (length args))) (.. " " (table.concat args " ")) "") ")"))
          (table.insert out (.. "  " (: (or d "Undocumented.") :gsub "\n" "\n  ")))
          (when (< 0 (length keys))
            (table.insert out (.. "  Advised: " (fennel.view keys))))
          (when file (table.insert out (.. "  Defined in " file ":" line))))
        (= :table (type v))
        (let [ks (icollect [k (pairs v)] (tostring k))]
          (table.sort ks)
          (table.insert out (.. full "  (table)"))
          (table.insert out (.. "  " (table.concat ks " "))))
        (not= nil v)
        (table.insert out (.. full " = " (fennel.view v)))
        (table.insert out (.. "Nothing named " name)))
    (table.concat out "\n")))

(fn oml.print-doc [name]
  "What `doc` expands to: print (oml.describe NAME)."
  (print (oml.describe name)))

(fn form-at [text line]
  "The text of the top-level form of TEXT that starts on or encloses LINE."
  (var best nil)
  (let [(ok err) (pcall (fn []
                          (each [ok? ast (fennel.parser text)]
                            (let [src (fennel.ast-source ast)]
                              (when (and ok? src.line src.bytestart (<= src.line line))
                                (set best src))))))]
    (when (and best best.bytestart best.byteend)
      (text:sub best.bytestart best.byteend))))

(fn oml.source-of [name]
  "Where NAME is defined and its source text, as a string; nil when the source is unknown."
  (let [(v full) (oml.lookup name)
        s (. registry (or full name))
        (file line) (if (= :function (type v)) (oml.where v)
                        s (values s.file s.line))]
    (when (and file line)
      (let [text (or (oml.embedded-source file) (oml.read-file file))
            form (and text (form-at text line))]
        (.. file ":" line (if form (.. "\n" form) ""))))))

(fn oml.print-source [name]
  "What `source` expands to: print where NAME is defined and its source text."
  (print (or (oml.source-of name) (.. "No source for " name))))

(fn oml.apropos-list [pattern]
  "Documented functions and settings whose qualified name matches PATTERN (a Lua pattern, or
plain text when it is not a valid pattern), as {:name :summary}, sorted."
  (let [matches? (fn [s] (let [(ok found) (pcall string.find s pattern)]
                           (if ok found (s:find pattern 1 true))))
        out {}]
    (each [name s (pairs registry)]
      (when (matches? name) (tset out name (oml.summary s.doc))))
    (each [ns t (pairs _G)]
      (when (and (= :string (type ns)) (= :table (type t)) (not (. hidden ns)))
        (each [k v (pairs t)]
          (let [full (.. ns "." (tostring k))]
            (when (and (= :function (type v)) (matches? full))
              (let [(d) (fn-doc v)]
                (when d (tset out full (oml.summary d)))))))))
    (let [names (icollect [k (pairs out)] k)]
      (table.sort names)
      (icollect [_ n (ipairs names)] {:name n :summary (. out n)}))))

(fn apropos [pattern]
  "Print the documented functions and settings whose name matches PATTERN."
  (each [_ m (ipairs (oml.apropos-list pattern))]
    (print (.. m.name "  " m.summary)))
  nil)
(set _G.apropos apropos)

;;; Small helpers for user code

(fn log [...]
  "Write the arguments to stderr with the prefix [oml]; never to the protocol stream."
  (oml.log (table.concat (icollect [_ v (ipairs [...])] (tostring v)) " ")))
(set _G.log log)

;;; Settings of the host itself (`init.project-init` is declared by src/lisp/init.rs, which
;;; reads it)

(fn here [] (. (debug.getinfo 2 :l) :currentline))

(oml.defsetting* "repl.history-size" 1000
                 {:type :integer :doc "Lines of REPL history kept in the state directory (the newest are kept)."
                  :file "src/lisp/prelude/core.fnl" :line (here)})
