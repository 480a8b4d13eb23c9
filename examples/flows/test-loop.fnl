;; Run the tests; while they fail, hand the failures to an agent and run them again, until
;; they pass or the budget of rounds is spent. Every test run and every fix is a step, so a
;; re-run after an interruption goes on from where it stopped.
;;
;;   oml run examples/flows/test-loop.fnl AGENT "cargo test" 5
;;
;; The test command runs as you (it is your program, not the agent's); the agent may edit
;; files.

(local [agent command budget] [(. arg 1) (. arg 2) (tonumber (or (. arg 3) "5"))])
(when (not (and agent command))
  (print "usage: oml run test-loop.fnl AGENT TEST-COMMAND [ROUNDS]")
  (os.exit 2))

(fn run-tests []
  "The test command's exit and the end of its output."
  (let [p (io.popen (.. command " 2>&1; echo \"exit=$?\""))
        out (p:read :a)]
    (p:close)
    (let [code (tonumber (out:match "exit=(%d+)%s*$"))
          tail (if (< 6000 (length out)) (out:sub -6000) out)]
      {:passed (= code 0) :output tail})))

(fn loop [round]
  (let [tests (flow.step (.. "tests-" round) run-tests)]
    (if tests.passed
        (do (print (.. "the tests pass after " (- round 1) " fix(es)")) true)
        (> round budget)
        (do (print (.. "still failing after " budget " rounds")) false)
        (do (flow.step (.. "fix-" round)
              #(. (client.ask agent (.. "`" command "` fails:\n\n" tests.output
                                        "\n\nFix the cause (not the tests, unless they are wrong).")
                              {:policy :approve-all})
                  :stop-reason))
            (loop (+ round 1))))))

(let [passed (loop 1)]
  (flow.finish)
  (os.exit (if passed 0 1)))
