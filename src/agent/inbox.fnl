;; Messages that join a running turn: `agent.take-posted!`, the step `agent.run-model-call`
;; calls before each model call, takes what was posted to the session's inbox (`session.post!`:
;; a steered prompt, a background task's result), appends it to the transcript and shows it.
;; Also `agent.prompt-while-busy`, what a front end does with a prompt sent while a turn runs.
;; It does not decide when a posted message starts a turn of its own: that is the front end's.

(local agent _G.agent)
(local session _G.session)

(defsetting agent.prompt-while-busy :queue [:queue :steer]
  "What a prompt sent while the session's turn runs does (over ACP, `session/prompt`; in the chat, Enter): :queue runs it as a turn of its own when the running turn ends; :steer posts its text to the running turn (`session.post!`), where it joins as a user message before the next model call, and runs as a turn of its own only when the turn ends before taking it.")

(fn message-text [message]
  "The text of MESSAGE's content: the string itself, or its text parts joined."
  (let [c message.content]
    (if (= :string (type c)) c
        (= :table (type c))
        (table.concat (icollect [_ part (ipairs c)]
                        (when (and (= :table (type part)) (= :string (type part.text))) part.text)))
        "")))

(fn agent.take-posted! []
  "Append what was posted to the session (`session.take-posted!`) to its transcript, in order,
and show each message with a :user-message event (its text; an editor shows it as the user's).
Called by `agent.run-model-call` before each model call. Returns the messages taken."
  (let [posted (session.take-posted!)]
    (when (< 0 (length posted))
      (session.append-message! posted)
      (each [_ m (ipairs posted)]
        (session.emit! {:type :user-message :role m.role :text (message-text m)})))
    posted))
