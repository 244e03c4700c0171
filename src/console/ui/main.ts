import { html, render } from "htm/preact";
import { useEffect, useState } from "preact/hooks";
import { api, type Mode, signIn, storedToken, storeToken } from "./api";
import { KeysPage } from "./pages/keys";
import { LogPage } from "./pages/log";
import { OverviewPage } from "./pages/overview";
import { PlaygroundPage } from "./pages/playground";
import { ProvidersPage } from "./pages/providers";
import { SandboxesPage } from "./pages/sandboxes";
import { SessionsPage } from "./pages/sessions";
import { UsagePage } from "./pages/usage";
import { WebhooksPage } from "./pages/webhooks";
import { AgentsPage } from "./pages/agents";
import { AutomationPage } from "./pages/automation";
import { CatalogPage } from "./pages/catalog";
import { applyStoredTheme, ThemeToggle } from "./theme";
import { ErrorNote, type Org } from "./widgets";

const MODE_KEY = "gateway-console-mode";

const PAGES = [
  { id: "overview", label: "Overview" },
  { id: "keys", label: "Organizations and keys", admin: true },
  { id: "providers", label: "Providers and models", admin: true },
  { id: "usage", label: "Usage" },
  { id: "log", label: "Request log" },
  { id: "playground", label: "Playground" },
  { id: "sandboxes", label: "Sandboxes" },
  { id: "sessions", label: "Agent sessions" },
  { id: "webhooks", label: "Webhooks" },
  { id: "agents", label: "Agents" },
  { id: "automation", label: "Endpoints and deployments" },
  { id: "catalog", label: "Skills and templates" },
] as const;

function currentPage(mode: Mode): string {
  const id = location.hash.replace(/^#\/?/, "");
  const allowed = PAGES.filter((p) => mode === "admin" || !("admin" in p));
  return allowed.some((p) => p.id === id) ? id : allowed[0].id;
}

/**
 * Sign-in: the admin token or an organization key, kept in sessionStorage for this tab
 * only and never written into the page. Threat: a token in the DOM (a field's value, a
 * heading) would be exposed to anything reading the page; the field is cleared on submit.
 */
function SignIn({ onSignedIn }: { onSignedIn: (mode: Mode) => void }) {
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    const input = (e.target as HTMLFormElement).elements.namedItem("token") as HTMLInputElement;
    const token = input.value.trim();
    input.value = "";
    setBusy(true);
    try {
      const mode = await signIn(token);
      storeToken(token);
      sessionStorage.setItem(MODE_KEY, mode);
      onSignedIn(mode);
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return html`<main id="main" class="signin">
    <h1>Gateway console</h1>
    <form onSubmit=${submit} aria-describedby="signin-help">
      <label for="token">Admin token or organization API key</label>
      <input id="token" name="token" type="password" required autocomplete="off" autofocus />
      <button type="submit" disabled=${busy}>Sign in</button>
    </form>
    <p id="signin-help" class="muted">The admin token (ADMIN_TOKEN) shows every organization; an API key shows its own organization (it needs scope <code>usage</code> or no scopes). It is kept for this browser tab only.</p>
    <${ErrorNote} message=${error} />
  </main>`;
}

function App() {
  const [mode, setMode] = useState<Mode | undefined>(() => (storedToken() ? ((sessionStorage.getItem(MODE_KEY) as Mode | null) ?? undefined) : undefined));
  const [page, setPage] = useState(() => (mode ? currentPage(mode) : ""));
  const [orgs, setOrgs] = useState<Org[]>([]);
  const [org, setOrg] = useState<string>();
  const [orgTick, setOrgTick] = useState(0);
  const [error, setError] = useState<string>();

  useEffect(() => {
    const onHash = () => mode && setPage(currentPage(mode));
    addEventListener("hashchange", onHash);
    return () => removeEventListener("hashchange", onHash);
  }, [mode]);
  useEffect(() => {
    if (mode !== "admin") return;
    api<Org[]>("/admin/organizations").then(
      (list) => {
        setOrgs(list);
        setOrg((cur) => cur ?? list[0]?.id);
      },
      (e: Error) => setError(e.message),
    );
  }, [mode, orgTick]);

  const signOut = () => {
    storeToken(null);
    sessionStorage.removeItem(MODE_KEY);
    setMode(undefined);
  };
  if (!mode) return html`<${SignIn} onSignedIn=${(m: Mode) => { setMode(m); setPage(currentPage(m)); }} />`;

  const common = { mode, orgs, org, onOrg: setOrg };
  const body =
    page === "overview" ? html`<${OverviewPage} mode=${mode} orgs=${orgs} />`
    : page === "providers" ? html`<${ProvidersPage} />`
    : page === "playground" ? html`<${PlaygroundPage} mode=${mode} />`
    : page === "keys" ? html`<${KeysPage} orgs=${orgs} org=${org} onOrg=${setOrg} onOrgsChanged=${() => setOrgTick((t) => t + 1)} />`
    : page === "usage" ? html`<${UsagePage} mode=${mode} orgs=${orgs} />`
    : page === "log" ? html`<${LogPage} mode=${mode} orgs=${orgs} />`
    : page === "sandboxes" ? html`<${SandboxesPage} ...${common} />`
    : page === "sessions" ? html`<${SessionsPage} ...${common} />`
    : page === "agents" ? html`<${AgentsPage} ...${common} />`
    : page === "automation" ? html`<${AutomationPage} ...${common} />`
    : page === "catalog" ? html`<${CatalogPage} ...${common} />`
    : html`<${WebhooksPage} ...${common} />`;
  return html`
    <a class="skip" href="#main">Skip to content</a>
    <header>
      <span class="brand">Gateway console</span>
      <span class="muted">${mode === "admin" ? "Signed in as the administrator" : "Signed in with an organization key"}</span>
      <${ThemeToggle} />
      <button type="button" onClick=${signOut}>Sign out</button>
    </header>
    <nav aria-label="Console pages">
      <ul>
        ${PAGES.filter((p) => mode === "admin" || !("admin" in p)).map(
          (p) => html`<li><a href=${`#/${p.id}`} aria-current=${page === p.id ? "page" : undefined}>${p.label}</a></li>`,
        )}
      </ul>
    </nav>
    <main id="main" tabindex="-1">
      <${ErrorNote} message=${error} />
      ${body}
    </main>`;
}

applyStoredTheme();
render(html`<${App} />`, document.getElementById("app")!);
