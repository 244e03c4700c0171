import { html } from "htm/preact";
import { useState } from "preact/hooks";
import { api, query } from "../api";
import { formatBytes } from "../details";
import { useLoad } from "../hooks";
import { ErrorNote, Loading } from "../widgets";

interface Entry {
  name: string;
  type: "file" | "dir";
  path: string;
  size?: number;
}

/** The file API's base64 as bytes, and bytes as base64 for an upload. */
const fromBase64 = (b64: string) => Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
function toBase64(bytes: Uint8Array): string {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

const parentOf = (path: string) => path.replace(/\/[^/]+\/?$/, "") || "/";

/** Text to show, or undefined for a file that is not (valid UTF-8 without NULs). */
function asText(bytes: Uint8Array): string | undefined {
  if (bytes.includes(0)) return undefined;
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
}

/** A running sandbox's files: browse directories, open and download files, upload into the directory shown. */
export function SandboxFiles({ sandboxId }: { sandboxId: string }) {
  const base = `/sandboxes/${encodeURIComponent(sandboxId)}/filesystem`;
  const [dir, setDir] = useState("/home/user");
  const list = useLoad<Entry[]>(() => api(`${base}/list${query({ path: dir })}`), [base, dir]);
  const [opened, setOpened] = useState<{ path: string; text?: string; size: number }>();
  const [error, setError] = useState<string>();
  const [status, setStatus] = useState("");

  const read = async (path: string) => fromBase64((await api<{ content: string }>(`${base}${query({ path })}`)).content);
  const open = async (e: Entry) => {
    try {
      const bytes = await read(e.path);
      setOpened({ path: e.path, text: asText(bytes), size: bytes.length });
      setError(undefined);
    } catch (err) {
      setError((err as Error).message);
    }
  };
  const download = async (e: Entry) => {
    try {
      const url = URL.createObjectURL(new Blob([await read(e.path)]));
      const a = document.createElement("a");
      a.href = url;
      a.download = e.name;
      a.click();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
      setStatus(`Downloaded ${e.name}.`);
    } catch (err) {
      setError((err as Error).message);
    }
  };
  const upload = async (ev: Event) => {
    ev.preventDefault();
    const input = (ev.target as HTMLFormElement).elements.namedItem("upload-file") as HTMLInputElement;
    const file = input.files?.[0];
    if (!file) return setError("choose a file to upload");
    try {
      const path = `${dir.replace(/\/$/, "")}/${file.name}`;
      await api(base, { method: "POST", body: { path, content: toBase64(new Uint8Array(await file.arrayBuffer())) } });
      input.value = "";
      setError(undefined);
      setStatus(`Uploaded ${path}.`);
      list.reload();
    } catch (err) {
      setError((err as Error).message);
    }
  };
  const go = (ev: Event) => {
    ev.preventDefault();
    const v = ((ev.target as HTMLFormElement).elements.namedItem("files-path") as HTMLInputElement).value.trim();
    if (v === dir) list.reload();
    else if (v) setDir(v);
  };

  return html`<section aria-labelledby="files-title" class="panel">
    <h3 id="files-title">Files</h3>
    <form class="inline" onSubmit=${go} aria-label="Go to a directory">
      <label for="files-path">Directory</label>
      <input id="files-path" name="files-path" value=${dir} key=${dir} class="wide" />
      <button type="submit">Go</button>
      <button type="button" onClick=${() => setDir(parentOf(dir))} disabled=${dir === "/"}>Up one level</button>
      <button type="button" onClick=${list.reload}>Refresh the files</button>
    </form>
    <form class="inline" onSubmit=${upload} aria-label="Upload a file">
      <label for="upload-file">Upload into ${dir}</label>
      <input id="upload-file" name="upload-file" type="file" />
      <button type="submit">Upload</button>
    </form>
    <p role="status" class="muted">${status}</p>
    <${ErrorNote} message=${error ?? list.error} />
    <${Loading} when=${list.loading && !list.data} />
    <table>
      <caption>Contents of ${dir}</caption>
      <thead><tr><th scope="col">Name</th><th scope="col">Kind</th><th scope="col">Size</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>
        ${(list.data ?? []).map(
          (e) => html`<tr>
            <td>${e.type === "dir" ? html`<button type="button" class="link" onClick=${() => setDir(e.path)}>${e.name}/</button>` : e.name}</td>
            <td>${e.type === "dir" ? "directory" : "file"}</td>
            <td>${e.type === "file" ? formatBytes(e.size) : ""}</td>
            <td>${e.type === "file" ? html`<button type="button" onClick=${() => open(e)} aria-label=${`Open ${e.name}`}>Open</button> <button type="button" onClick=${() => download(e)} aria-label=${`Download ${e.name}`}>Download</button>` : null}</td>
          </tr>`,
        )}
        ${list.data && !list.data.length ? html`<tr><td colspan="4">This directory is empty.</td></tr>` : null}
      </tbody>
    </table>
    ${opened &&
    html`<section aria-labelledby="file-title">
      <h4 id="file-title">${opened.path} <span class="muted">(${formatBytes(opened.size)})</span></h4>
      ${opened.text !== undefined ? html`<pre class="file" tabindex="0" aria-label=${`Content of ${opened.path}`}>${opened.text}</pre>` : html`<p class="muted">A binary file: download it to look at it.</p>`}
      <button type="button" onClick=${() => setOpened(undefined)}>Close the file</button>
    </section>`}
  </section>`;
}
