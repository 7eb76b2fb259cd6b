import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Label, LabelCreate, LabelList, LabelListQuery } from "@taskwright/domain"
import { ConflictError, ForbiddenError, RequestErrors } from "../Errors.js"
import { Authentication, RequiredScope } from "../Security.js"
import { contractQuery } from "./Common.js"

export class LabelsGroup extends HttpApiGroup.make("labels")
  .add(
    HttpApiEndpoint.get("list", "/api/labels")
      .setUrlParams(contractQuery(LabelListQuery))
      .addSuccess(LabelList)
      .annotate(RequiredScope, "tasks:read")
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
