;; oml now has grep, find and ls built in (see "The search tools" in docs/src/agent.md); you do
;; not need this file to search. It stays as an example of tools written in Fennel on two host
;; primitives, (oml.list-dir path) and (oml.run-process [program arg ...]): loading it replaces
;; the built-in three with these versions.
;; Install: copy to ~/.config/oml/lisp/ and add (require :search-tools) to init.fnl.

(oml.defsetting* "my.max-lines" 200
                 {:type :integer :doc "Lines ls, find and grep return before they cut the rest off."})
(oml.defsetting* "my.max-line-chars" 300
                 {:type :integer :doc "Characters of one line of ls, find or grep output; longer lines end in ..."})

(fn cut-line [line]
  (let [at (and (utf8.len line) (utf8.offset line (+ my.max-line-chars 1)))]
    (if (and at (<= at (length line))) (.. (line:sub 1 (- at 1)) "...") line)))

(fn capped [lines]
  "LINES joined, at most my.max-lines of them, each cut to my.max-line-chars."
  (let [n (length lines)
        shown (icollect [i l (ipairs lines) &until (> i my.max-lines)] (cut-line l))]
    (when (> n my.max-lines)
      (table.insert shown (.. "[" (- n my.max-lines) " more lines; narrow the search]")))
    (table.concat shown "\n")))

(fn list-dir! [dir]
  (let [(entries err) (oml.list-dir dir)]
    (or entries (error err 0))))

(fn tools.ls [{: path}]
  {:fnl/docstring "List a directory: its entries sorted by name, directories ending in /."
   :kind :read :title "List {path}"
   :params {:path [:string "Directory, relative to the working directory (default: the working directory)" :optional]}}
  (let [entries (list-dir! (or path "."))]
    (if (= 0 (length entries))
        "(empty)"
        (capped (icollect [_ e (ipairs entries)] (if e.dir? (.. e.name "/") e.name))))))

;;; find: glob matching on path segments. `*` and `?` stay inside a segment, `**` matches any
;;; number of segments (so `**/x` also matches a top-level x), `[...]` and `{a,b}` as usual.

(fn expand-braces [pat]
  (let [(pre body post) (pat:match "^(.-){([^{}]*)}(.*)$")]
    (if pre
        (let [out []]
          (each [alt (string.gmatch (.. body ",") "([^,]*),")]
            (each [_ p (ipairs (expand-braces (.. pre alt post)))]
              (table.insert out p)))
          out)
        [pat])))

(fn segment-pattern [seg]
  (if (= seg "**")
      "**"
      (.. "^" (-> seg
                  (: :gsub "[%^%$%(%)%%%.%+%-]" "%%%0")
                  (: :gsub "%*+" ".*")
                  (: :gsub "%?" ".")
                  (: :gsub "%[!" "[^"))
          "$")))

(fn split [s] (icollect [part (string.gmatch s "[^/]+")] part))

(fn match-segments [pats i segs j]
  (if (> i (length pats)) (> j (length segs))
      (= (. pats i) "**")
      (or (match-segments pats (+ i 1) segs j)
          (and (<= j (length segs)) (match-segments pats i segs (+ j 1))))
      (and (<= j (length segs))
           (not= nil (string.find (. segs j) (. pats i)))
           (match-segments pats (+ i 1) segs (+ j 1)))))

(fn walk [base rel out]
  "Append to OUT the relative paths of the files under BASE/REL, hidden entries skipped."
  (each [_ e (ipairs (list-dir! (if (= rel "") base (.. base "/" rel))))]
    (when (not (e.name:match "^%."))
      (let [p (if (= rel "") e.name (.. rel "/" e.name))]
        (if e.dir? (walk base p out) (table.insert out p)))))
  out)

(fn tools.find [{: pattern : path}]
  {:fnl/docstring "Find files by glob pattern (e.g. **/*.rs), relative to a directory. Hidden files are skipped."
   :kind :search :title "Find {pattern}"
   :params {:pattern [:string "Glob, relative to the directory: * and ? within a name, ** across directories"]
            :path [:string "Directory to search (default: the working directory)" :optional]}}
  (let [globs (icollect [_ g (ipairs (expand-braces pattern))]
                (icollect [_ s (ipairs (split g))] (segment-pattern s)))
        found (icollect [_ p (ipairs (walk (or path ".") "" []))]
                (let [segs (split p)]
                  (when (accumulate [hit false _ g (ipairs globs) &until hit]
                          (match-segments g 1 segs 1))
                    p)))]
    (table.sort found)
    (if (= 0 (length found)) "No files found." (capped found))))

;;; grep: ripgrep when it is on PATH, else grep -rE.

(fn on-path? [program]
  (accumulate [found false dir (string.gmatch (or (os.getenv :PATH) "") "[^:]+") &until found]
    (let [f (io.open (.. dir "/" program))]
      (when f (f:close))
      (not= nil f))))

(fn grep-argv [pattern path glob]
  (let [argv (if (on-path? :rg)
                 [:rg :-n :--no-heading :--color=never]
                 [:grep :-rnE])]
    (when glob
      (if (= (. argv 1) :rg)
          (do (table.insert argv :-g) (table.insert argv glob))
          (table.insert argv (.. "--include=" glob))))
    (table.insert argv :-e)
    (table.insert argv pattern)
    (when path (table.insert argv path))
    argv))

(fn line-key [line]
  (let [(file n) (line:match "^(.-):(%d+):")]
    (if file [file (tonumber n)] [line 0])))

(fn by-file-and-line [a b]
  (let [ka (line-key a) kb (line-key b)]
    (if (= (. ka 1) (. kb 1)) (< (. ka 2) (. kb 2)) (< (. ka 1) (. kb 1)))))

(fn tools.grep [{: pattern : path : glob}]
  {:fnl/docstring "Search file contents for a regular expression; lines come back as file:line:text."
   :kind :search :title "Grep {pattern}"
   :params {:pattern [:string "Regular expression (extended syntax)"]
            :path [:string "File or directory to search (default: the working directory)" :optional]
            :glob [:string "Only files whose name matches this glob, e.g. *.rs" :optional]}}
  (let [r (oml.run-process (grep-argv pattern path glob))]
    (case r.exit
      0 (let [lines (icollect [l (string.gmatch r.stdout "[^\n]+")] l)]
          (table.sort lines by-file-and-line)
          (capped lines))
      1 "No matches."
      _ (error (.. "grep failed: " (or (r.stderr:match "^%s*(.-)%s*$") "")) 0))))

{: capped : expand-braces}
