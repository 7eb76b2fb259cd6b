import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import {
  ApiKeyCreate,
  ApiKeyId,
  ApiKeyList,
  ApiKeyListParams,
  ApiKeyWithSecret,
  KeyUsageReport
} from "@taskwright/core"
import { Schema } from "effect"
import { ConflictError, NotFoundError } from "../Errors.js"
import { Authentication, RequiredScope } from "../Security.js"
import { Success } from "./Common.js"

const KeyPath = Schema.Struct({ id: ApiKeyId })

/** API key management (the settings page's keys section): own keys with any valid credential, other users' with `admin`. */
export class KeysGroup extends HttpApiGroup.make("keys")
  .add(
    HttpApiEndpoint.get("list", "/api/keys")
      .setUrlParams(ApiKeyListParams)
      .addSuccess(ApiKeyList)
      .annotate(RequiredScope, "authenticated")
      .annotate(OpenApi.Summary, "The caller's API keys (admin: ?user_id=), never their secrets")
  )
  .add(
    HttpApiEndpoint.post("create", "/api/keys")
      .setPayload(ApiKeyCreate)
      .addSuccess(ApiKeyWithSecret, { status: 201 })
      .addError(NotFoundError)
      .annotate(RequiredScope, "authenticated")
      .annotate(OpenApi.Summary, "Create a key; the secret is in this answer only")
  )
  .add(
    HttpApiEndpoint.post("rotate", "/api/keys/:id/rotate")
      .setPath(KeyPath)
      .addSuccess(ApiKeyWithSecret)
      .addError(NotFoundError)
      .addError(ConflictError)
      .annotate(RequiredScope, "authenticated")
      .annotate(OpenApi.Summary, "A new secret for the key; the old one and its access tokens stop working at once")
  )
  .add(
    HttpApiEndpoint.del("revoke", "/api/keys/:id")
      .setPath(KeyPath)
      .addSuccess(Success)
      .addError(NotFoundError)
      .addError(ConflictError)
      .annotate(RequiredScope, "authenticated")
      .annotate(OpenApi.Summary, "Revoke the key; it and its access tokens stop working at once")
  )
  .add(
    HttpApiEndpoint.get("usage", "/api/keys/:id/usage")
      .setPath(KeyPath)
      .addSuccess(KeyUsageReport)
      .addError(NotFoundError)
      .annotate(RequiredScope, "authenticated")
      .annotate(OpenApi.Summary, "Requests made with the key: total, last use, per day (90 days)")
  )
  .middleware(Authentication) {}
