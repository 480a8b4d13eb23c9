;; Recipe: put the project's AGENTS.md (or CLAUDE.md) into every system prompt.
;; Install: copy to ~/.config/oml/lisp/ and add (require :project-context) to init.fnl.
;; The file is read fresh for every request, so edits apply to the next model call.

(oml.defsetting* "my.context-files" [:AGENTS.md :CLAUDE.md]
                 {:type :table :doc "Files looked for in the session directory; the first found is used."})

(advise! agent.system-prompt :project-context
  (fn [system-prompt]
    (let [found (accumulate [hit nil _ name (ipairs my.context-files) &until hit]
                  (let [text (oml.read-file (.. (session.cwd) "/" name))]
                    (when text {: name : text})))]
      (if found
          (.. (system-prompt) "\n\nProject instructions (" found.name "):\n\n" found.text)
          (system-prompt)))))
