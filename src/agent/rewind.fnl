;; Checkpoints, and rewind and fork as slash commands: what a tool call changes is kept
;; before it runs; /rewind lists the prompts of the session and takes the conversation, the
;; files, or both back to just before one; /fork starts a new session from this one. The work
;; is done by `session.prompts`, `session.rewind` and `session.fork` and the checkpoint
;; functions (src/bind/session/rewind.rs, changes.rs); these read the input and say what
;; happened. Loaded after commands.fnl.

(local agent _G.agent)
(local commands _G.commands)
(local session _G.session)
(local json _G.json)

;;; Checkpoints: what a tool call changes, kept before it runs (agent.execute-tool calls
;;; agent.with-checkpoint)

(fn agent.checkpointed-path [call]
  "The file the tool CALL changes, whose content before is kept for /rewind: the resolved
`path` of a call of kind edit, delete or move that is not an MCP server's; nil for others."
  (let [p (and (. {:edit true :delete true :move true} call.kind) (not call.mcp)
               (= :table (type call.args)) call.args.path)]
    (when (and (= :string (type p)) (= "/" (p:sub 1 1))) p)))

(fn agent.with-checkpoint [call f]
  "Call F, the tool CALL's run, with what it changes kept for /rewind: the file of a
file-changing call (`agent.checkpointed-path`, through `session.checkpoint-before` and
`session.checkpoint-after`), or what a command (kind execute, not an MCP server's) changes in
the session's git work tree (`session.command-checkpoint-before` and `-after`). Returns what F
returns; a failing F records what it changed all the same."
  (let [path (agent.checkpointed-path call)
        command? (and (= call.kind :execute) (not call.mcp) (oml.setting "checkpoint.commands?"))
        (ok token) (if path (pcall session.checkpoint-before path)
                       command? (pcall session.command-checkpoint-before)
                       (values true nil))
        after (if path session.checkpoint-after session.command-checkpoint-after)]
    (if (not (and ok token))
        (f)
        (let [res (table.pack (xpcall f (fn [e] e)))]
          (pcall after token)
          (if (. res 1)
              (table.unpack res 2 res.n)
              (error (. res 2) 0))))))

;;; The commands

(local scopes {:both :both :files :files :code :files :conversation :conversation})

(fn agent.parse-rewind [input]
  "The rewind INPUT asks for, \"N [both|files|conversation] [force]\", as {:n :scope :force};
nil and why when it is not one."
  (let [words (icollect [w (input:gmatch "%S+")] w)
        n (tonumber (. words 1))]
    (var scope :both)
    (var force false)
    (var bad nil)
    (for [i 2 (length words)]
      (let [w (. words i)]
        (if (= w :force) (set force true)
            (. scopes w) (set scope (. scopes w))
            (set bad w))))
    (if (or (not n) (not= n (math.floor n))) (values nil "Usage: /rewind [N [both|files|conversation] [force]]")
        bad (values nil (.. "Unknown word " bad ": say both, files, conversation or force"))
        {: n : scope : force})))

(fn plural [n word]
  (.. n " " word (if (= n 1) "" "s")))

(fn agent.prompt-list []
  "The prompts of this session as /rewind lists them, one line each, or a line saying there
are none."
  (let [ps (session.prompts)]
    (if (= 0 (length ps))
        "No prompts to rewind to yet."
        (.. (table.concat (icollect [_ p (ipairs ps)]
                            (.. p.n ". " (p.text:gsub "%s+" " ")
                                (if (< 0 p.files) (.. "  (" (plural p.files "file") " changed)") "")))
                          "\n")
            "\n\n/rewind N takes the conversation and the files back to just before prompt N; add `files` or `conversation` for one of them."))))

(fn path-list [title paths]
  ;; A paragraph, then a Markdown list of PATHS: each on a line of its own in any editor.
  (if (= 0 (length paths)) ""
      (.. "\n\n" title "\n\n"
          (table.concat (icollect [_ p (ipairs paths)] (.. "- `" p "`")) "\n"))))

(fn agent.rewind-report [r scope]
  "What /rewind shows of the result R of `session.rewind` with SCOPE, in Markdown: paragraphs
apart, the files as lists."
  (if r.refused
      (.. "Nothing was rewound."
          (path-list "These files changed since oml last wrote them:" r.conflicts)
          (path-list "The earlier content of these was not kept (checkpoint.max-bytes, or not a regular file):" r.lost)
          "\n\n`/rewind " r.prompt (if (= scope :both) "" (.. " " scope)) " force` overwrites the changed ones and leaves the others as they are.")
      (.. "Rewound to just before prompt " r.prompt ": " (r.text:gsub "%s+" " ")
          (if r.messages (.. "\n\nThe conversation is back to " (plural r.messages "message") ".") "")
          (path-list "Restored:" r.restored)
          (path-list "Removed (created since):" r.removed)
          (path-list "Left as they are (their earlier content was not kept):" r.lost)
          (path-list "Could not be put back:" r.failed)
          (if (and (not= scope :conversation) (= 0 (+ (length r.restored) (length r.removed))))
              "\n\nNo file needed restoring."
              ""))))

(fn agent.write-restored [path content session-id]
  "Called by `session.rewind` for each file it puts back, with its PATH (absolute, no link in
it) and earlier CONTENT (bytes), in the session SESSION-ID: true when it wrote the file itself,
nil to have `session.rewind` write it on the disk; an error is why the file could not be put
back. Returns nil here; `oml acp` redefines it to write through the editor when it offers to."
  nil)

(fn agent.on-rewound [r]
  "Called by /rewind after the rewind R (the result of `session.rewind`) was done, not refused:
shows the plan it took back (R's :plan) as a plan event. `oml acp` advises it to show the files
put back as a tool card too."
  (when r.plan
    (session.emit! {:type :plan
                    :entries (if (< 0 (length r.plan)) (agent.plan-entries r.plan) (json.array))})))

(fn commands.rewind [input]
  {:fnl/docstring "Take this session back to just before an earlier prompt: the conversation, the files oml changed since, or both. Without N, list the prompts."
   :hint "[N [both|files|conversation] [force]]"}
  (if (= "" input)
      (agent.prompt-list)
      (let [(req why) (agent.parse-rewind input)]
        (if (not req) why
            (let [r (session.rewind req.n req.scope req.force)]
              (when (not r.refused) (agent.on-rewound r))
              (agent.rewind-report r req.scope))))))

(fn commands.fork [input]
  {:fnl/docstring "Start a new session from this one, with its whole history or what came before prompt N; both go on independently."
   :hint "[N]"}
  (let [n (tonumber input)]
    (if (and (not= "" input) (not n))
        "Usage: /fork [N]"
        (let [id (session.fork n)]
          (.. "Forked as " id (if n (.. ", with the history before prompt " n) ", with the whole history")
              ". Open it from your editor's session list, or with `oml --session " id "`.")))))
