import { Schema } from "effect"
import { LabelId } from "../domain/Ids.js"
import { PageParams } from "../domain/Paging.js"
import { Timestamp } from "../domain/Timestamp.js"

export const LabelName = Schema.compose(
  Schema.Trim,
  Schema.String.pipe(
    Schema.minLength(1, { message: () => "a label name must not be empty" }),
    Schema.maxLength(50, { message: () => "a label name must be at most 50 characters" })
  )
)

export const Color = Schema.String.pipe(Schema.pattern(/^#[0-9a-fA-F]{6}$/, { message: () => "color must be #rrggbb" }))

export const Label = Schema.Struct({
  id: LabelId,
  name: Schema.String,
  color: Color,
  created_at: Timestamp
})
export type Label = typeof Label.Type

export const LabelCreate = Schema.Struct({ name: LabelName, color: Color })
export type LabelCreate = typeof LabelCreate.Type

export const LabelList = Schema.Struct({
  labels: Schema.Array(Label),
  total: Schema.Number,
  limit: Schema.Number,
  offset: Schema.Number
})
export type LabelList = typeof LabelList.Type

export const LabelListParams = Schema.Struct(PageParams)

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
