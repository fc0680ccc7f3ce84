/** outlast's AG-UI client: an HttpAgent whose streams survive dropped connections. */
export {
  ResumableHttpAgent,
  type BackoffConfig,
  type ConnectionState,
  type ConnectionStatus,
  type Frame,
  type ResumableHttpAgentConfig,
} from "./resumable-agent";
export { StreamHttpError, readSse, type SseHandlers } from "./sse";
