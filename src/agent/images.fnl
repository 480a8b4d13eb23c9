;; Images in the conversation: a prompt's image parts in its user message, and `read` of an
;; image file, whose image follows the tool results as a user message (a tool message carries
;; text only). Loaded after agent.fnl; the loop calls these functions by name.

(local oml _G.oml)
(local agent _G.agent)

(local file "src/agent/images.fnl")

(defsetting llm.images? true :boolean
  "Whether the model takes images: a prompt's image blocks and `read` of an image file reach it as `image_url` parts with data URLs. False gives it a note instead (a model that only reads text).")

(fn agent.user-content [text ?parts]
  "The content of the user message for TEXT and ?PARTS (OpenAI content parts, such as
{:type :image_url :image_url {:url \"data:…\"}}): TEXT alone, or a list of parts, TEXT's first."
  (if (or (not= :table (type ?parts)) (= 0 (length ?parts)))
      text
      (let [parts (if (text:find "%S") [{:type :text : text}] [])]
        (each [_ p (ipairs ?parts)] (table.insert parts p))
        parts)))

(fn agent.read-image [path]
  "What `read` gives for the image file PATH: when `llm.images?`, a short text and the image as
an `image_url` part ({:content :images}, the loop passes the images on after the tool results);
otherwise a note that the model does not take images."
  (if (not (oml.setting "llm.images?"))
      {:content (.. path " is an image (" (or (oml.image-mime path) "?") "); it is not included, because the model does not take images (llm.images? is false).")}
      (let [(image why) (oml.read-image path)]
        (if (not image)
            {:content (.. "Cannot read the image: " (or why "")) :error? true}
            {:content (.. "Read the image " path " (" image.mime ", " image.bytes " bytes); it follows the tool results.")
             :images [{:type :image_url :image_url {:url image.url}}]}))))

(fn agent.tool-images-message [results]
  "The user message that carries the images the tool RESULTS gave (their :images, OpenAI
`image_url` parts), after a line that says what they are; nil when there are none."
  (let [parts []]
    (each [_ r (ipairs results)]
      (when (= :table (type r.images))
        (each [_ part (ipairs r.images)] (table.insert parts part))))
    (when (< 0 (length parts))
      (table.insert parts 1 {:type :text :text "The images the tool calls above returned:"})
      {:role :user :content parts})))
