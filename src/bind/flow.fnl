;; The `flow` namespace: multi-step programs (run with `oml run`) that resume where they
;; failed. Each finished step's result is recorded in a state file next to the flow; a re-run
;; returns a recorded step's result without running it again, and runs the first unfinished
;; step. See docs/src/flows.md.
;;
;; Compiled to bytecode by build.rs and run by src/bind/flow.rs with the `flow` table.

(local flow ...)
(local json _G.json)

(var state-path nil)
(var state nil)

(fn default-path []
  (let [script (and _G.arg (. _G.arg 0))]
    (when (not= :string (type script))
      (error "flow: no flow file to keep the state beside; run the flow with `oml run FILE` or call (flow.start PATH) first" 3))
    (.. script ".state.json")))

(fn read-state [path]
  (case (io.open path :r)
    f (let [text (f:read :a)
            _ (f:close)
            (ok value) (pcall json.decode text)]
        (if (and ok (= :table (type value)) (= :table (type value.steps)))
            value
            (error (.. "flow: the state file " path " is damaged; delete it to start the flow afresh") 0)))
    _ {:steps {} :order []}))

(fn write-state [path value]
  (let [tmp (.. path ".tmp")
        text (json.encode value)]
    (case (io.open tmp :w)
      f (do (f:write text) (f:close))
      (nil why) (error (.. "flow: cannot write " tmp ": " why) 0))
    (case (os.rename tmp path)
      (nil why) (error (.. "flow: cannot replace " path ": " why) 0))))

(fn loaded []
  (when (= nil state)
    (set state-path (or state-path (default-path)))
    (set state (read-state state-path)))
  state)

(fn flow.start [path]
  "Keep this flow's state in PATH (default: the flow file's name with .state.json). Call it
before the first step; returns the path."
  (set state-path path)
  (set state nil)
  path)

(fn flow.step [name f]
  "Run step NAME: (F) once; its result (JSON-able: nil, booleans, numbers, strings, tables) is
recorded in the flow's state file before it is returned. When the state already records NAME,
its result is returned and F is not called. A step that raises records nothing, so a re-run
starts again at that step."
  (when (not= :string (type name))
    (error "flow.step: the first argument is the step's name, a string" 2))
  (let [s (loaded)
        kept (. s.steps name)]
    (if kept
        kept.result
        (let [result (f)]
          (tset s.steps name {:result result :at (os.time)})
          (table.insert s.order name)
          (let [(ok why) (pcall write-state state-path s)]
            (when (not ok)
              (tset s.steps name nil)
              (table.remove s.order)
              (error why 0)))
          result))))

(fn flow.done? [name]
  "Whether step NAME has finished in this flow's state."
  (not= nil (. (loaded) :steps name)))

(fn flow.steps []
  "The names of the finished steps, in the order they finished."
  (icollect [_ n (ipairs (or (. (loaded) :order) []))] n))

(fn flow.finish []
  "Forget the flow's state (delete its file): the next run starts from the first step. A flow
calls it when its last step is done."
  (let [path (or state-path (default-path))]
    (os.remove path)
    (set state nil)
    path))

flow
