;; The same question to several agents at once, their answers side by side. Each agent's
;; answer is a step, so a re-run after one agent failed asks only the ones that did not answer.
;;
;;   oml run examples/flows/compare.fnl "What does src/main.rs do?" codex claude gemini
;;
;; Agents only read (the default policy allows reads and searches and rejects the rest).

(local question (. arg 1))
(local agents (fcollect [i 2 (length arg)] (. arg i)))
(when (or (not question) (= 0 (length agents)))
  (print "usage: oml run compare.fnl QUESTION AGENT…")
  (os.exit 2))

;; One coroutine per agent: they run at the same time.
(local running
  (icollect [_ agent (ipairs agents)]
    (client.spawn #(flow.step agent #(. (client.ask agent question) :text)))))

(local failed [])
(each [i handle (ipairs running)]
  (let [agent (. agents i)]
    (case (pcall client.join handle)
      (true text) (print (.. "── " agent " ──\n" text "\n"))
      (false e) (do (table.insert failed agent)
                    (print (.. "── " agent " failed: " (tostring e)))))))

(if (= 0 (length failed))
    (flow.finish)
    (do (print (.. "run again to ask " (table.concat failed ", ") " again"))
        (os.exit 1)))
