;; The session's wire protocol across calls: when a call speaks another protocol than the
;; session's last one while the transcript keeps reasoning only another protocol reads, the
;; session says so. Loaded after agent.fnl; agent.call-model calls `agent.protocol-notice` by
;; name.

(local agent _G.agent)
(local session _G.session)

;; The field of an assistant message in which each native protocol keeps what it must get back.
(local kept-fields {:anthropic :thinking_blocks :responses :reasoning_items
                    :gemini :thought_signatures})

(fn kept-for-another? [protocol]
  ;; Whether an assistant message of the transcript keeps reasoning that only a protocol other
  ;; than PROTOCOL reads.
  (accumulate [found false _ m (ipairs (session.transcript)) &until found]
    (and (= m.role :assistant)
         (accumulate [other false p field (pairs kept-fields) &until other]
           (and (not= p protocol) (not= nil (. m field)))))))

(fn agent.protocol-notice [model api]
  "Before a model call of the current session with MODEL and API: when its protocol
(`llm.protocol`) differs from the session's last call's and the transcript keeps reasoning only
another protocol reads (Anthropic's thinking, Responses' reasoning items, Gemini's signatures),
say, as a thought, that it is not sent."
  (let [(ok now) (pcall _G.llm.protocol model api)
        before (session.get :protocol)]
    (when ok
      (when (and before (not= before now) (kept-for-another? now))
        (session.emit! {:type :thought-delta
                        :text (.. "Switched from the " before " protocol to " now
                                  ": the reasoning kept for " before " is not sent.\n")}))
      ;; Recorded only when it changes, and not for a session that has only spoken chat (which
      ;; keeps nothing another protocol could miss): a recorded key is a write to the session
      ;; file, and the headline benchmark saw that cost double an ACP tool turn.
      (when (and (not= before now) (or before (not= now :chat)))
        (session.put! :protocol now)))))
