;; Recipe: token usage totals per session, kept by advice on agent.call-model.
;; Install: copy to ~/.config/oml/lisp/ and add (require :usage) to init.fnl; then /tokens.
;; (The built-in /usage does the same from the core; this shows how to build it yourself.)

(local totals {})

(advise! agent.call-model :usage-totals
  (fn [call-model request]
    (let [response (call-model request)
          id (or (session.current) :none)
          t (or (. totals id) {:calls 0 :prompt 0 :completion 0})
          u (if (= :table (type response.usage)) response.usage {})]
      (set t.calls (+ t.calls 1))
      (set t.prompt (+ t.prompt (or (tonumber u.prompt_tokens) 0)))
      (set t.completion (+ t.completion (or (tonumber u.completion_tokens) 0)))
      (tset totals id t)
      response)))

(fn commands.tokens [input]
  "Show this session's model calls and tokens, as counted by the usage recipe."
  (let [t (. totals (or (session.current) :none))]
    (if t
        (.. t.calls " model calls, " t.prompt " prompt tokens, " t.completion " completion tokens")
        "No model calls yet.")))

totals
