import { Schema } from "effect"
import { Text, TrimmedText } from "./Bounds.js"
import { LabelId } from "./Ids.js"
import { PageFields, PageParams, PageQuery } from "./Paging.js"
import { Timestamp } from "./Timestamp.js"

/** The longest label name. */
export const MAX_LABEL_NAME = 50

export const LabelName = TrimmedText(
  `a label name must be 1 to ${MAX_LABEL_NAME} characters long`,
  MAX_LABEL_NAME,
  `A label's name, 1 to ${MAX_LABEL_NAME} characters (spaces around it are dropped).`
)

const COLOR = /^#[0-9a-fA-F]{6}$/
const colorMessage = () => "color must be # followed by six hexadecimal digits, like #d73a4a"
export const Color = Schema.String.pipe(
  Schema.length(7, { message: colorMessage }),
  Schema.pattern(COLOR, {
    message: colorMessage,
    title: "colour",
    description: "A colour as # and six hexadecimal digits (#rrggbb).",
    examples: ["#d73a4a"]
  })
)

export const Label = Schema.Struct({
  id: LabelId,
  name: Text(MAX_LABEL_NAME, "The label's name, as first written."),
  color: Color,
  created_at: Timestamp
}).annotations({
  description: "A label.",
  examples: [
    { id: LabelId.make("lbl_2Fk8sPq0ZrW4mN7d"), name: "docs", color: "#0075ca", created_at: "2026-11-21T23:43:04.123Z" }
  ]
})
export type Label = typeof Label.Type

export const LabelCreate = Schema.Struct({ name: LabelName, color: Color }).annotations({
  description: "A new label: its name (unique per user, whatever the case) and colour.",
  examples: [{ name: "docs", color: "#0075ca" }]
})
export type LabelCreate = typeof LabelCreate.Type

export const LabelList = Schema.Struct({
  labels: Schema.Array(Label).annotations({ jsonSchema: { maxItems: 200 } }),
  ...PageFields
}).annotations({
  description: "A page of labels, by name.",
  examples: [
    {
      labels: [
        {
          id: LabelId.make("lbl_2Fk8sPq0ZrW4mN7d"),
          name: "docs",
          color: "#0075ca",
          created_at: "2026-11-21T23:43:04.123Z"
        }
      ],
      total: 1,
      limit: 50,
      offset: 0
    }
  ]
})
export type LabelList = typeof LabelList.Type

export const LabelListParams = Schema.Struct(PageParams)
/** {@link LabelListParams} as a query string (the contract). */
export const LabelListQuery = Schema.Struct(PageQuery)

// A fixed, readable palette; the colour of an on-the-fly label is stable for its name.
const palette = [
  "#d73a4a",
  "#0075ca",
  "#a2eeef",
  "#7057ff",
  "#008672",
  "#e4e669",
  "#d876e3",
  "#fbca04",
  "#0e8a16",
  "#b60205"
]

/** The default colour of a label created on the fly, derived from its (case-folded) name. */
export const defaultColor = (name: string): string => {
  let h = 0
  for (const ch of name.toLowerCase()) h = (h * 31 + (ch.codePointAt(0) ?? 0)) >>> 0
  return palette[h % palette.length] ?? "#0075ca"
}
