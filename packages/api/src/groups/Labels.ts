import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Label, LabelCreate, LabelList, LabelListParams } from "@taskwright/core"
import { ConflictError } from "../Errors.js"
import { Authentication, RequiredScope } from "../Security.js"

export class LabelsGroup extends HttpApiGroup.make("labels")
  .add(
    HttpApiEndpoint.get("list", "/api/labels")
      .setUrlParams(LabelListParams)
      .addSuccess(LabelList)
      .annotate(RequiredScope, "tasks:read")
  )
  .add(
    HttpApiEndpoint.post("create", "/api/labels")
      .setPayload(LabelCreate)
      .addSuccess(Label, { status: 201 })
      .addError(ConflictError)
      .annotate(RequiredScope, "tasks:write")
  )
  .middleware(Authentication) {}
