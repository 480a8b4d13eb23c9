;; The permission rules of the settings files users already keep — Claude Code's
;; `permissions.allow`, `ask` and `deny` in ~/.claude/settings.json, oml's own settings.json and
;; a project's .claude/settings.json and settings.local.json (`project.setting-rules` reads and
;; types them) — and which of them apply: the user's own always; a project's only while it is
;; trusted (`project.trusted?`), and only to narrow (its deny and ask rules; never its allow).
;; What a verdict does in each mode is `agent.check-permission`'s (permission.fnl, loaded
;; before this file); this file knows nothing of modes or of asking.

(local agent _G.agent)
(local session _G.session)
(local project _G.project)

(local narrow-only "a project may only narrow what the user allows")

(fn trust-of [dir]
  ;; A function saying whether the project of DIR is trusted (and why not), asked once.
  (var known nil)
  (fn []
    (when (= nil known)
      (let [(ok why) (project.trusted? dir)]
        (set known [(= true ok) why])))
    (values (. known 1) (. known 2))))

(fn why-unused [r trusted?]
  ;; Why the settings rule R does not apply, or nil when it does.
  (if (not r.rule) r.unsupported
      (and r.project? (= r.verdict :allow)) narrow-only
      r.project? (let [(ok why) (trusted?)]
                   (when (not ok) (or why "the project is not trusted")))
      nil))

(fn agent.setting-rules [?dir]
  "The permission rules of the settings files for a session in ?DIR (default: the session's
directory), as `project.setting-rules` reads them, each with :used? and, when it is not used,
:why: a rule oml cannot apply (a tool it does not have), a project's allow rule (a project may
only narrow what the user allows), a project's rule while the project is not trusted
(`project.trusted?`). Returns {:rules :problems}; what /setup lists."
  (let [dir (or ?dir (session.cwd))
        found (project.setting-rules dir)
        trusted? (trust-of dir)]
    {:problems found.problems
     :rules (icollect [_ r (ipairs found.rules)]
              (let [why (why-unused r trusted?)
                    entry (collect [k v (pairs r)] k v)]
                (set entry.used? (= nil why))
                (set entry.why why)
                entry))}))

(fn command-words [command]
  ;; The words of COMMAND with quotes and backslashes taken out, split at blanks and at what
  ;; chains, substitutes or redirects: every word that may run, wherever it stands.
  (let [plain (command:gsub "['\"\\]" "")]
    (icollect [w (plain:gmatch "[^%s;&|`$<>(){}]+")] w)))

(fn same-word? [have want prefix?]
  ;; Whether the command word HAVE is WANT, or a path ending in it (`/bin/rm`); with PREFIX?
  ;; whether it starts with WANT, as Claude Code's `rm:*` covers `rmdir`.
  (let [base (or (have:match "/([^/]+)$") have)]
    (if prefix?
        (or (= want (have:sub 1 (length want))) (= want (base:sub 1 (length want))))
        (or (= have want) (= base want)))))

(fn words-within? [have want prefix?]
  ;; Whether the words WANT stand in a row anywhere in HAVE (the last one a prefix with PREFIX?).
  (let [n (length want)]
    (accumulate [found false start _ (ipairs have) &until found]
      (and (<= (+ start n -1) (length have))
           (accumulate [ok true i w (ipairs want) &until (not ok)]
             (same-word? (. have (+ start i -1)) w (and prefix? (= i n))))))))

(fn lexical [path]
  ;; PATH made absolute against the session's directory (~ the home folder) with `.` and `..`
  ;; taken out, no link followed: the path as the call names it.
  (let [home (or (os.getenv "HOME") "")
        abs (if (path:find "^/") path
                (path:find "^~/") (.. home (path:sub 2))
                (.. (session.cwd) "/" path))
        parts []]
    (each [part (abs:gmatch "[^/]+")]
      (if (= part "..") (table.remove parts)
          (not= part ".") (table.insert parts part)))
    (.. "/" (table.concat parts "/"))))

(fn glob-may-match? [rule call]
  (let [p (and (= :table (type call.args)) call.args.path)
        p (if (and (= :string (type p)) (not= p "")) p ".")
        reach (= call.kind :search)
        real (agent.tool-path call)]
    (or (and real (project.glob-matches? rule.glob real reach))
        (project.glob-matches? rule.glob (lexical p) reach))))

(fn agent.rule-may-match? [rule call]
  "Whether the settings file's deny or ask RULE may cover the tool CALL, read broadly, as a rule
that narrows must be: whatever `agent.rule-matches?` covers, and also a command holding the
rule's words in a row anywhere — behind `sudo`, variable assignments or a wrapper, after a `;`,
a pipe or a `$(`, inside quotes, as `/bin/rm` for `rm` — the last word of a prefix rule as a
prefix (`rm:*` covers `rmdir`); a path rule's file by the path as the call names it too (no
link followed), and a search (grep, find) over a folder that holds what the rule names."
  (let [args (or call.args {})]
    (if (agent.rule-matches? rule call) true
        (not (agent.rule-tool? rule call)) false
        (or rule.prefix rule.exact)
        (words-within? (command-words (or args.command "")) (command-words (or rule.prefix rule.exact))
                       (not= nil rule.prefix))
        rule.glob (glob-may-match? rule call)
        false)))

(fn agent.setting-verdict [call]
  "The settings files' rule that decides the tool CALL, or nil: the first deny rule that may
cover it (`agent.rule-may-match?`), else the first ask rule that may, else the first allow rule
that covers it (`agent.rule-matches?`) — only rules that apply (see `agent.setting-rules`). The
rule as `project.setting-rules` lists it: {:verdict :text :source :origin :rule}."
  (let [dir (session.cwd)
        found (project.setting-rules dir)]
    (when (< 0 (length found.rules))
      (let [trusted? (trust-of dir)
            best {}]
        (each [_ r (ipairs found.rules) &until best.deny]
          (when (and (not (. best r.verdict)) r.rule
                     (if (= r.verdict :allow) (agent.rule-matches? r.rule call)
                         (agent.rule-may-match? r.rule call))
                     (= nil (why-unused r trusted?)))
            (tset best r.verdict r)))
        (or best.deny best.ask best.allow)))))
