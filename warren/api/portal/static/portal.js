// The endpoint portal: one tenant's endpoints, through the admin API with a portal session.
// Every text from the API goes in with textContent (el()), never as HTML.
const KEY = "warren.portal.session";

function takeSession() {
  const match = location.hash.match(/[#&]session=([^&]+)/);
  if (match) {
    sessionStorage.setItem(KEY, decodeURIComponent(match[1]));
    history.replaceState(null, "", location.pathname + "#/");
  }
  return sessionStorage.getItem(KEY);
}

let session = takeSession();
const view = document.getElementById("view");
const status = document.getElementById("status");

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "onclick" || name === "onsubmit") node.addEventListener(name.slice(2), value);
    else if (value !== undefined && value !== null && value !== false) node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function say(text, error = false) {
  status.textContent = text;
  status.className = error ? "error" : "";
}

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || `HTTP ${status}`);
    this.status = status;
  }
}

async function api(method, path, body) {
  const headers = { Authorization: `Bearer ${session}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  const data = text ? JSON.parse(text) : null;
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

function show(...children) {
  view.replaceChildren(...children);
  view.focus();
}

// Endpoints per page of the list: the admin API pages by name, each page's next_cursor naming where the next
// begins (#/?after=<cursor>), so a page is an address the browser's Back returns to.
const PAGE = 50;
const AFTER = /^#\/\?after=([^&]+)$/;

async function listPage(after = null) {
  const query = new URLSearchParams({ limit: String(PAGE) });
  if (after) query.set("cursor", after);
  const page = await api("GET", `/v1/endpoints?${query}`);
  const rows = page.data.map((e) =>
    el("tr", {}, el("td", {}, el("a", { href: `#/endpoints/${encodeURIComponent(e.name)}` }, e.name)),
      el("td", {}, e.url), el("td", {}, e.events.join(", ")), el("td", {}, e.state)));
  const paging = el("nav", { class: "actions", "aria-label": "Pages" },
    after ? el("a", { href: "#/" }, "First page") : null,
    page.next_cursor ? el("a", { href: `#/?after=${encodeURIComponent(page.next_cursor)}` }, "Next page") : null);
  show(
    el("h2", {}, "Endpoints"),
    el("div", { class: "actions" }, el("a", { href: "#/new" }, "Add an endpoint")),
    rows.length
      ? el("table", {}, el("thead", {}, el("tr", {}, ["Name", "URL", "Events", "State"].map((h) => el("th", { scope: "col" }, h)))), el("tbody", {}, rows))
      : el("p", { class: "muted" }, after ? "No more endpoints." : "No endpoint yet."),
    ...(paging.childElementCount ? [paging] : []),
  );
}

async function eventTypeChoices(chosen = []) {
  const catalog = await api("GET", "/v1/event-types");
  const names = [...new Set(catalog.data.map((t) => t.name))];
  if (!names.length) return null;
  return el("fieldset", {}, el("legend", {}, "Event types"),
    names.map((name, i) => [el("input", { type: "checkbox", id: `type-${i}`, name: "type", value: name, checked: chosen.includes(name) }),
      el("label", { for: `type-${i}` }, name)]));
}

function chosenEvents(form) {
  const picked = [...form.querySelectorAll("input[name=type]:checked")].map((box) => box.value);
  const typed = (form.elements.patterns.value || "").split(",").map((p) => p.trim()).filter(Boolean);
  return [...picked, ...typed];
}

async function newPage() {
  const choices = await eventTypeChoices();
  const form = el("form", { onsubmit: async (event) => {
    event.preventDefault();
    try {
      const made = await api("POST", "/v1/endpoints", { name: form.elements.name.value, url: form.elements.url.value, events: chosenEvents(form) });
      show(el("h2", {}, `Endpoint ${made.name} added`),
        el("p", {}, "Its signing secret, shown this once: keep it where your receiver can read it."),
        el("p", { class: "secret", id: "secret" }, made.secret),
        el("a", { href: `#/endpoints/${encodeURIComponent(made.name)}` }, "Go to the endpoint"));
      say(`Endpoint ${made.name} added.`);
    } catch (error) { say(error.message, true); }
  } },
    el("label", { for: "name" }, "Name"), el("input", { type: "text", id: "name", name: "name", required: true, pattern: "[a-z0-9][a-z0-9_-]{0,62}" }),
    el("label", { for: "url" }, "URL"), el("input", { type: "url", id: "url", name: "url", required: true }),
    choices,
    el("label", { for: "patterns" }, "Other event types or patterns (comma-separated; * one word, # any)"),
    el("input", { type: "text", id: "patterns", name: "patterns" }),
    el("div", { class: "actions" }, el("button", { type: "submit" }, "Add")));
  show(el("h2", {}, "Add an endpoint"), form);
}

const FAILED_FOR_GOOD = new Set(["dead", "exhausted"]);

function attemptsTable(attempts, path) {
  if (!attempts.length) return el("p", { class: "muted" }, "No delivery attempt recorded yet.");
  const again = (a) => el("button", { type: "button", class: "secondary", "aria-label": `Send ${a.event_id} again`, onclick: async () => {
    try {
      const done = await api("POST", `${path}/replay`, { event_ids: [a.event_id] });
      say(done.replayed ? `Event ${a.event_id} sent again.` : `Event ${a.event_id} is no longer waiting to be sent again.`, !done.replayed);
    } catch (error) { say(error.message, true); }
  } }, "Send again");
  const rows = attempts.map((a) => el("tr", {},
    el("td", {}, a.at), el("td", {}, a.event_id), el("td", {}, a.attempt),
    el("td", { class: a.failed ? "failed" : "delivered" }, a.outcome),
    el("td", {}, a.status ?? "—"), el("td", {}, Math.round(a.duration_ms)),
    el("td", { class: "response" }, a.error || a.response || ""),
    el("td", {}, FAILED_FOR_GOOD.has(a.outcome) ? again(a) : "")));
  return el("table", { id: "attempts" },
    el("thead", {}, el("tr", {}, ["When", "Event", "#", "Outcome", "Status", "ms", "Answer or error", ""].map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, rows));
}

async function endpointPage(name) {
  let endpoint;
  try {
    endpoint = await api("GET", `/v1/endpoints/${encodeURIComponent(name)}`);
  } catch (error) {
    if (error.status === 404) { show(el("h2", {}, "Not found"), el("p", {}, `There is no endpoint ${name}.`)); return; }
    throw error;
  }
  const path = `/v1/endpoints/${encodeURIComponent(name)}`;
  const attempts = await api("GET", `${path}/attempts?limit=50`);
  const act = (label, run, kind = "") => el("button", { type: "button", class: kind, onclick: async () => {
    try { await run(); } catch (error) { say(error.message, true); }
  } }, label);
  const secretSlot = el("div", { id: "rotated" });
  const paused = endpoint.state === "paused";
  const edit = el("form", { onsubmit: async (event) => {
    event.preventDefault();
    try {
      await api("PATCH", path, { url: edit.elements.url.value, events: chosenEvents(edit) });
      say("Saved."); await endpointPage(name);
    } catch (error) { say(error.message, true); }
  } },
    el("label", { for: "url" }, "URL"), el("input", { type: "url", id: "url", name: "url", value: endpoint.url, required: true }),
    await eventTypeChoices(endpoint.events),
    el("label", { for: "patterns" }, "Other event types or patterns (comma-separated)"),
    el("input", { type: "text", id: "patterns", name: "patterns", value: endpoint.events.join(", ") }),
    el("div", { class: "actions" }, el("button", { type: "submit", class: "secondary" }, "Save")));
  const since = el("input", { type: "text", id: "since", name: "since", value: "1h" });
  show(
    el("h2", {}, endpoint.name),
    el("p", {}, "State: ", el("strong", { id: "state" }, endpoint.state)),
    el("p", {}, "Home: ", el("strong", { id: "home" }, endpoint.home === "lane" ? "shared lane" : "queues of its own")),
    el("div", { class: "actions" },
      act(paused ? "Resume" : "Pause", async () => { await api("POST", `${path}/${paused ? "resume" : "pause"}`); say(paused ? "Resumed." : "Paused."); await endpointPage(name); }),
      act("Send a test event", async () => {
        const sent = await api("POST", `${path}/test`);
        say(sent.delivered ? `Test event delivered (HTTP ${sent.status}).` : `Test event not taken: ${sent.error || sent.status}.`, !sent.delivered);
      }, "secondary"),
      act("Rotate the secret", async () => {
        const rotated = await api("POST", `${path}/rotate-secret`);
        secretSlot.replaceChildren(el("p", {}, "The new secret, shown this once (the old one signs too until its grace ends):"),
          el("p", { class: "secret", id: "secret" }, rotated.secret),
          ...(rotated.public_key ? [el("p", {}, "Its Ed25519 public key, which your receiver verifies with:"),
            el("p", { class: "public-key", id: "public-key" }, rotated.public_key)] : []));
        say("Secret rotated.");
      }, "secondary"),
      act("Delete", async () => {
        if (!confirm(`Delete ${name}? Events waiting for it are discarded.`)) return;
        await api("DELETE", `${path}?force=true`); say(`Endpoint ${name} deleted.`); location.hash = "#/";
      }, "danger")),
    secretSlot,
    el("h3", {}, "Settings"), edit,
    el("h3", {}, "Send again what failed"),
    el("label", { for: "since" }, "Failed for good since (an ISO time, or ago: 30m, 2h, 1d)"), since,
    el("div", { class: "actions" }, act("Recover", async () => {
      const done = await api("POST", `${path}/recover?since=${encodeURIComponent(since.value)}`);
      say(`${done.recovered} event(s) sent again.`);
    }, "secondary")),
    el("h3", {}, "Recent delivery attempts"), attemptsTable(attempts.data, path),
  );
}

async function route() {
  session = takeSession(); // a new link opened in this tab brings its own session
  if (!session) {
    show(el("h2", {}, "No session"), el("p", {}, "Open the portal from the link your platform gives you."));
    return;
  }
  const hash = location.hash || "#/";
  try {
    if (hash.startsWith("#/endpoints/")) await endpointPage(decodeURIComponent(hash.slice("#/endpoints/".length)));
    else if (hash === "#/new") await newPage();
    else if (AFTER.test(hash)) await listPage(decodeURIComponent(hash.match(AFTER)[1]));
    else await listPage();
  } catch (error) {
    if (error.status === 401) show(el("h2", {}, "Session over"), el("p", {}, "Open the portal again from your platform."));
    else say(error.message, true);
  }
}

window.addEventListener("hashchange", () => { say(""); route(); });
route();
