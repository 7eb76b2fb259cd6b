import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Label, LabelCreate, LabelList, LabelListQuery } from "@taskwright/domain"
import { ErrorExamples, fieldExample } from "../Documentation.js"
import { ConflictError, ForbiddenError, RequestErrors } from "../Errors.js"
import { Authentication, RequiredScope } from "../Security.js"
import { contractQuery } from "./Common.js"

export class LabelsGroup extends HttpApiGroup.make("labels")
  .add(
    HttpApiEndpoint.get("list", "/api/labels")
      .setUrlParams(contractQuery(LabelListQuery))
      .addSuccess(LabelList)
      .annotate(RequiredScope, "tasks:read")
      .annotate(ErrorExamples, {
        400: [
          fieldExample("A limit of 0", "limit", "limit must be a whole number from 1 to 200", {
            bounds: { minimum: 1, maximum: 200, integer: true }
          })
        ]
      })
      .annotate(OpenApi.Summary, "List labels")
      .annotate(
        OpenApi.Description,
        "The caller's labels (an admin's: everyone's) by name, a page at a time. Needs tasks:read."
      )
  )
  .add(
    HttpApiEndpoint.post("create", "/api/labels")
      .setPayload(LabelCreate)
      .addSuccess(Label, { status: 201 })
      .addError(ConflictError)
      .annotate(RequiredScope, "tasks:write")
      .annotate(ErrorExamples, {
        400: [
          fieldExample(
            "A colour that is not #rrggbb",
            "color",
            "color must be # followed by six hexadecimal digits, like #d73a4a",
            {
              bounds: { minLength: 7, maxLength: 7 }
            }
          )
        ],
        409: [
          {
            summary: "The caller has a label of that name",
            message: 'a label named "docs" already exists',
            details: { field: "name", name: "docs" }
          }
        ]
      })
      .annotate(OpenApi.Summary, "Create a label")
      .annotate(
        OpenApi.Description,
        "Creates a label; its colour is kept as sent. A name the caller already has, whatever its case, is 409. Needs tasks:write."
      )
  )
  .middleware(Authentication)
  .addError(RequestErrors)
  .addError(ForbiddenError)
  .annotate(OpenApi.Description, "Labels: names and colours to sort tasks by.") {}
