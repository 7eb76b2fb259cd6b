import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import {
  ApiKeyCreate,
  ApiKeyId,
  ApiKeyList,
  ApiKeyListQuery,
  ApiKeyWithSecret,
  KeyUsageReport
} from "@taskwright/domain"
import { Schema } from "effect"
import { ErrorExamples, fieldExample, notFoundExample, ownedExample } from "../Documentation.js"
import { ConflictError, ForbiddenError, NotFoundError, RequestErrors } from "../Errors.js"
import { Authentication, RequiredScope } from "../Security.js"
import { contractQuery, Success } from "./Common.js"

const KeyPath = Schema.Struct({ id: ApiKeyId })

const badKeyId = fieldExample(
  "An id that is not a key id",
  "id",
  "id must look like key_ followed by 16 letters or digits",
  { bounds: { minLength: 20, maxLength: 20 } }
)

const revoked = {
  summary: "The key is revoked",
  message: "api key key_0Qm7Zc2Wx9Hs4Pd1 is revoked",
  details: { reason: "revoked" }
}

/** API key management (the settings page's keys section): own keys with any valid credential, other users' with `admin`. */
export class KeysGroup extends HttpApiGroup.make("keys")
  .add(
    HttpApiEndpoint.get("list", "/api/keys")
      .setUrlParams(contractQuery(ApiKeyListQuery))
      .addSuccess(ApiKeyList)
      .annotate(RequiredScope, "authenticated")
      .annotate(ErrorExamples, {
        400: [
          fieldExample("Not a user id", "user_id", "user_id must look like usr_ followed by 16 letters or digits", {
            bounds: { minLength: 20, maxLength: 20 }
          })
        ],
        403: [
          {
            summary: "Another user's keys, without admin",
            message: "listing another user's keys needs the admin scope",
            details: { required_scope: "admin" }
          }
        ]
      })
      .annotate(OpenApi.Summary, "List API keys")
      .annotate(
        OpenApi.Description,
        "The caller's API keys, newest first, never with their secrets. An admin may list another user's with user_id (403 for anyone else)."
      )
  )
  .add(
    HttpApiEndpoint.post("create", "/api/keys")
      .setPayload(ApiKeyCreate)
      .addSuccess(ApiKeyWithSecret, { status: 201 })
      .addError(NotFoundError)
      .annotate(RequiredScope, "authenticated")
      .annotate(ErrorExamples, {
        400: [
          fieldExample("An empty name", "name", "a key name must be 1 to 100 characters long", {
            bounds: { minLength: 1, maxLength: 100 }
          })
        ],
        403: [
          {
            summary: "A scope the credential lacks",
            message: "this credential cannot grant admin",
            details: { reason: "scope_escalation", scopes: ["admin"] }
          }
        ],
        404: [notFoundExample("user", "usr_6Vn1bR9eTy3Ka5Lq")]
      })
      .annotate(OpenApi.Summary, "Create an API key")
      .annotate(
        OpenApi.Description,
        "Creates a key with the scopes chosen, never more than the credential creating it holds (403). The secret is in this answer only: it is stored as a SHA-256 digest. An admin may create a key for another user with user_id (404 if there is none)."
      )
  )
  .add(
    HttpApiEndpoint.post("rotate", "/api/keys/:id/rotate")
      .setPath(KeyPath)
      .addSuccess(ApiKeyWithSecret)
      .addError(NotFoundError)
      .addError(ConflictError)
      .annotate(RequiredScope, "authenticated")
      .annotate(ErrorExamples, {
        400: [badKeyId],
        403: [
          {
            summary: "The key carries a scope the credential lacks",
            message: "this credential cannot rotate a key carrying admin: it lacks that scope",
            details: { reason: "scope_escalation", scopes: ["admin"] }
          }
        ],
        404: [notFoundExample("api key", "key_0Qm7Zc2Wx9Hs4Pd1")],
        409: [revoked]
      })
      .annotate(OpenApi.Summary, "Rotate an API key")
      .annotate(
        OpenApi.Description,
        "A new secret for the key, answered once; the old secret and the access tokens made from it stop working at once. A revoked key is 409. The credential must hold every scope of the key (403)."
      )
  )
  .add(
    HttpApiEndpoint.del("revoke", "/api/keys/:id")
      .setPath(KeyPath)
      .addSuccess(Success)
      .addError(NotFoundError)
      .addError(ConflictError)
      .annotate(RequiredScope, "authenticated")
      .annotate(ErrorExamples, {
        400: [badKeyId],
        403: [
          {
            summary: "The key carries a scope the credential lacks",
            message: "this credential cannot revoke a key carrying admin: it lacks that scope",
            details: { reason: "scope_escalation", scopes: ["admin"] }
          }
        ],
        404: [notFoundExample("api key", "key_0Qm7Zc2Wx9Hs4Pd1")],
        409: [revoked]
      })
      .annotate(OpenApi.Summary, "Revoke an API key")
      .annotate(
        OpenApi.Description,
        "Revokes the key: it and its access tokens stop working at once. An already revoked key is 409. The credential must hold every scope of the key (403)."
      )
  )
  .add(
    HttpApiEndpoint.get("usage", "/api/keys/:id/usage")
      .setPath(KeyPath)
      .addSuccess(KeyUsageReport)
      .addError(NotFoundError)
      .annotate(RequiredScope, "authenticated")
      .annotate(ErrorExamples, {
        400: [badKeyId],
        403: [ownedExample("api key", "key_0Qm7Zc2Wx9Hs4Pd1")],
        404: [notFoundExample("api key", "key_0Qm7Zc2Wx9Hs4Pd1")]
      })
      .annotate(OpenApi.Summary, "Show an API key's usage")
      .annotate(
        OpenApi.Description,
        "Requests made with the key and its access tokens: the total, the last use and its client address, and a count per day over the last 90 days."
      )
  )
  .middleware(Authentication)
  .addError(RequestErrors)
  .addError(ForbiddenError)
  .annotate(OpenApi.Description, "API keys: the caller's own with any valid credential, another user's with admin.") {}
