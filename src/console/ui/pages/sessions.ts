import { html } from "htm/preact";
import { useEffect, useState } from "preact/hooks";
import { api, type Mode, paths, query } from "../api";
import { Badge } from "../details";
import { formatTime, useLoad } from "../hooks";
import { useEvery } from "../refresh";
import { followStream } from "../sse";
import { ErrorNote, Loading, type Org, OrgPicker, PageTitle } from "../widgets";
import { Conversation, type SessionEvent } from "./conversation";

interface SessionItem {
  id: string;
  title?: string | null;
  status: string;
  created_at: string;
  agent?: { id?: string; name?: string };
}

const POLL_MS = 2000;

/**
 * A session's events, kept live: with an organization key the event stream (every event,
 * then new ones as they commit); the administrator's view polls the event list.
 */
function useSessionEvents(mode: Mode, eventsPath: string, streamPath: string, follow: boolean) {
  const [events, setEvents] = useState<SessionEvent[]>([]);
  const [error, setError] = useState<string>();
  const [live, setLive] = useState(false);
  const add = (list: SessionEvent[]) =>
    setEvents((cur) => {
      const seen = new Set(cur.map((e) => e.id));
      const fresh = list.filter((e) => !seen.has(e.id));
      return fresh.length ? [...cur, ...fresh] : cur;
    });
  const poll = () => api<{ data: SessionEvent[] }>(eventsPath + query({ limit: 100, order: "asc" })).then((p) => add(p.data), (e: Error) => setError(e.message));
  useEffect(() => {
    setEvents([]);
    setError(undefined);
    if (mode === "admin" || !follow) {
      void poll();
      return;
    }
    const abort = new AbortController();
    setLive(true);
    followStream(streamPath, (m) => add([JSON.parse(m.data) as SessionEvent]), abort.signal)
      .catch((e: Error) => abort.signal.aborted || setError(e.message))
      .finally(() => setLive(false));
    return () => abort.abort();
  }, [eventsPath, follow]);
  useEvery(POLL_MS, poll, mode === "admin" && follow);
  return { events, error, live };
}

function SessionView({ mode, session, eventsPath, streamPath, onChanged }: { mode: Mode; session: SessionItem; eventsPath: string; streamPath: string; onChanged: () => void }) {
  const [follow, setFollow] = useState(true);
  const { events, error, live } = useSessionEvents(mode, eventsPath, streamPath, follow);
  const [sendError, setSendError] = useState<string>();
  const last = [...events].reverse().find((e) => e.type.startsWith("session.status_"));
  const status = last ? last.type.replace("session.status_", "") : session.status;

  const send = async (e: Event) => {
    e.preventDefault();
    const form = e.target as HTMLFormElement;
    const text = (form.elements.namedItem("session-message") as HTMLTextAreaElement).value.trim();
    if (!text) return;
    try {
      await api(`/v1/sessions/${encodeURIComponent(session.id)}/events`, { method: "POST", body: { events: [{ type: "user.message", content: [{ type: "text", text }] }] } });
      form.reset();
      setSendError(undefined);
      onChanged();
    } catch (err) {
      setSendError((err as Error).message);
    }
  };

  return html`<section aria-labelledby="session-title" class="detail">
    <h2 id="session-title">${session.title || "Session"} <code>${session.id}</code></h2>
    <p class="controls">
      <span>Status: <${Badge} status=${status} /></span>
      <span class="muted">Agent: ${session.agent?.name ?? session.agent?.id ?? "—"}</span>
      <button type="button" aria-pressed=${follow} onClick=${() => setFollow(!follow)}>${follow ? "Stop following" : "Follow live"}</button>
      <span class="muted" role="status">${follow ? (mode === "admin" ? `Refreshing every ${POLL_MS / 1000} s` : live ? "Following live" : "") : "Not following"}</span>
    </p>
    <${ErrorNote} message=${error} />
    <${Conversation} events=${events} />
    ${mode === "organization"
      ? html`<form class="compose" onSubmit=${send} aria-label="Send a message">
          <label for="session-message">Message to the agent</label>
          <textarea id="session-message" name="session-message" rows="3"></textarea>
          <button type="submit" disabled=${status === "running" || status === "terminated"}>Send</button>
          <${ErrorNote} message=${sendError} />
        </form>`
      : null}
  </section>`;
}

/** Agent sessions, and the one opened as a conversation that follows its running turn. */
export function SessionsPage({ mode, orgs, org, onOrg }: { mode: Mode; orgs: Org[]; org?: string; onOrg: (id: string) => void }) {
  const p = paths(mode, org);
  const list = useLoad<{ data: SessionItem[] }>(() => (mode === "admin" && !org ? Promise.resolve({ data: [] }) : api(p.sessions + query({ limit: 50 }))), [p.sessions]);
  useEvery(5000, list.reload);
  const [open, setOpen] = useState<string>();
  const opened = list.data?.data.find((s) => s.id === open);

  return html`<section>
    <${PageTitle}>Agent sessions<//>
    <${OrgPicker} mode=${mode} orgs=${orgs} org=${org} onChange=${(id: string) => { setOpen(undefined); onOrg(id); }} />
    <${ErrorNote} message=${list.error} />
    <${Loading} when=${list.loading && !list.data} />
    <div class="scroll">
    <table>
      <caption>Sessions, newest first</caption>
      <thead><tr><th scope="col">ID</th><th scope="col">Title</th><th scope="col">Agent</th><th scope="col">Status</th><th scope="col">Created</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>
        ${(list.data?.data ?? []).map(
          (s) => html`<tr class=${open === s.id ? "selected" : ""}>
            <td><code>${s.id}</code></td><td>${s.title ?? "—"}</td><td>${s.agent?.name ?? s.agent?.id ?? "—"}</td><td><${Badge} status=${s.status} /></td><td>${formatTime(s.created_at)}</td>
            <td><button type="button" aria-pressed=${open === s.id} onClick=${() => setOpen(s.id)} aria-label=${`Open the conversation of ${s.id}`}>Conversation</button></td>
          </tr>`,
        )}
        ${list.data && !list.data.data.length ? html`<tr><td colspan="6">No sessions.</td></tr>` : null}
      </tbody>
    </table>
    </div>
    ${opened && html`<${SessionView} key=${opened.id} mode=${mode} session=${opened} eventsPath=${p.sessionEvents(opened.id)} streamPath=${`/v1/sessions/${encodeURIComponent(opened.id)}/events/stream`} onChanged=${list.reload} />`}
  </section>`;
}
