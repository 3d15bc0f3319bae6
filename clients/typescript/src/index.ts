/**
 * Agent-Reach for Node: `Agent` for agent authors, `ReachClient` for callers,
 * `DelegationVerifier` for agents checking where a delivery comes from,
 * `ClientCredentials` for IdP tokens, and the typed errors of the API.
 */
export { Agent, REMEMBERED_REQUESTS } from "./agent.js";
export type { AgentOptions, Handler, ListenOptions, OfferAnswer, OfferFn, OfferRequest, Skill } from "./agent.js";
export { AgentRequest, NotMine, RequestContext, RetryLater } from "./request.js";
export type { DelegateOptions, Delegation } from "./request.js";
export { ReachClient } from "./client.js";
export type { InvokeOptions, ReachClientOptions, RouteOptions } from "./client.js";
export type { ContextView, InvokeResult } from "./results.js";
export type { TaskView } from "./views.js";
export type { StreamEvent } from "./streams.js";
export { DelegationVerifier } from "./delegation.js";
export type { DelegationVerifierOptions, Hop, VerifiedDelegation } from "./delegation.js";
export { ClientCredentials } from "./tokens.js";
export type { ClientCredentialsOptions, TokenCallable, TokenProvider } from "./tokens.js";
export {
  ReachError,
  Unauthorized,
  Forbidden,
  QuotaExceeded,
  CallerError,
  InvalidRequest,
  TlsSettingError,
  ValidationFailed,
  KeyReused,
  WorkflowRefused,
  EndpointRefused,
  NotFound,
  UnknownAgent,
  UnknownTask,
  UnknownRun,
  UnknownWorkflow,
  UnknownRequest,
  Conflict,
  InProgress,
  RunEnded,
  AlreadyRated,
  PayloadTooLarge,
  TargetTooLong,
  UnsupportedMediaType,
  HeadersTooLarge,
  VersionNotSupported,
  NoRoute,
  NoCapability,
  NoMatch,
  Ambiguous,
  NoInstance,
  AllDeclined,
  AgentFailed,
  AgentUnreachable,
  AgentTimeout,
  OutcomeUnknown,
  HopLimit,
  DelegationCycle,
  DelegationExpired,
  StoreUnavailable,
  StoreFull,
  Overloaded,
  TokenUnavailable,
  TaskPending,
  ERROR_CLASSES,
  errorFromBody,
} from "./errors.js";
export type { ErrorDetails } from "./errors.js";
