// The EventCloud dashboard: polls GET /status, draws the zones, streams a subscription (SSE).
// Plain JavaScript, no build step. The admin token (when the gateway asks for one) is kept in
// this tab's sessionStorage and sent as a bearer token (access_token for EventSource).
"use strict";

const DIMENSIONS = ["graph", "subject", "predicate", "object"];
const POLL_MS = 2000;
const state = { token: sessionStorage.getItem("eventcloud-token") || "", previous: null, source: null,
                axes: [0, 1], status: null };
const $ = (id) => document.getElementById(id);

function headers() {
  return state.token ? { Authorization: "Bearer " + state.token } : {};
}

function fmt(n) {
  return typeof n === "number" ? n.toLocaleString("en-US") : "–";
}

function setState(el, text, kind) {
  el.textContent = text;
  el.className = "state" + (kind ? " " + kind : "");
}

async function poll() {
  try {
    const reply = await fetch("/status", { headers: headers() });
    if (reply.status === 401 || reply.status === 403) {
      $("token-form").hidden = false;
      setState($("overlay-state"), reply.status === 401 ? "token needed" : "wrong token", "bad");
      return;
    }
    if (!reply.ok) {
      setState($("overlay-state"), (await reply.text()).trim(), "bad");
      return;
    }
    const status = await reply.json();
    render(status, performance.now());
  } catch (err) {
    setState($("overlay-state"), "gateway unreachable: " + err, "bad");
  } finally {
    setTimeout(poll, POLL_MS);
  }
}

function messages(peer) {
  let total = 0;
  for (const [name, value] of Object.entries(peer.counters || {})) {
    if (name.startsWith("in:")) total += value;
  }
  return total;
}

function render(status, now) {
  state.status = status;
  const g = status.gateway || {};
  if (g.auth && !state.token) $("token-form").hidden = false;  // subscribing will need it
  setState($("overlay-state"), `overlay through ${g.entry || "?"} · zones partition the space: ` +
           (status.partition ? "yes" : "NO"), status.partition ? "ok" : "bad");
  const rates = {};
  let totalRate = 0;
  if (state.previous) {
    const seconds = Math.max((now - state.previous.at) / 1000, 0.001);
    for (const peer of status.peers) {
      const before = state.previous.messages[peer.id];
      if (before !== undefined) {
        rates[peer.id] = Math.max(0, (messages(peer) - before) / seconds);
        totalRate += rates[peer.id];
      }
    }
  }
  state.previous = { at: now, messages: Object.fromEntries(status.peers.map((p) => [p.id, messages(p)])) };
  $("total-peers").textContent = fmt(status.peers.length);
  $("total-quads").textContent = fmt(status.totals.quads);
  $("total-events").textContent = fmt(status.totals.events);
  $("total-subscriptions").textContent = fmt(status.totals.subscriptions);
  $("total-rate").textContent = state.previous && Object.keys(rates).length ? totalRate.toFixed(1) : "–";
  $("algorithm").textContent = status.algorithm.toUpperCase();

  const body = $("peers").tBodies[0];
  body.replaceChildren();
  for (const peer of status.peers) {
    const row = body.insertRow();
    row.dataset.peer = peer.id;
    if (peer.down) row.className = "down";
    const zone = peer.zone.text.map(([lo, hi], i) =>
      `${DIMENSIONS[i][0]} [${JSON.stringify(lo)}, ${hi === null ? "end" : JSON.stringify(hi)})`).join("\n");
    const cells = [peer.id, peer.address, peer.down ? "down" : "up", fmt(peer.quads), fmt(peer.events),
                   fmt(peer.subscriptions), rates[peer.id] === undefined ? "–" : rates[peer.id].toFixed(1), zone];
    cells.forEach((text, i) => {
      const cell = row.insertCell();
      cell.textContent = text;
      if (i >= 3 && i <= 6) cell.className = "n";
      if (i === 7) cell.className = "zone";
    });
  }
  if (!state.axesChosen && !state.axesSet) {   // the first status: draw along the axes the zones are split on
    state.axes = splitAxes(status);
    state.axesSet = true;
    [$("axis-x"), $("axis-y")].forEach((select, which) => { select.value = String(state.axes[which]); });
  }
  drawZones(status);
}

function colour(quads, most) {
  const share = most > 0 ? quads / most : 0;        // 0: green, 1: red
  return `hsl(${Math.round(120 * (1 - share))}, 65%, ${Math.round(75 - 20 * share)}%)`;
}

function svg(name, attributes, text) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", name);
  for (const [k, v] of Object.entries(attributes)) el.setAttribute(k, v);
  if (text !== undefined) el.textContent = text;
  return el;
}

function drawZones(status) {
  const [ax, ay] = state.axes;
  const size = 420;
  const area = $("zones");
  area.replaceChildren();
  area.appendChild(svg("rect", { x: 0, y: 0, width: size, height: size, fill: "none", stroke: "#99a" }));
  const most = Math.max(0, ...status.peers.map((p) => p.quads));
  const area2 = (p) => (p.zone.fractions[ax][1] - p.zone.fractions[ax][0]) * (p.zone.fractions[ay][1] - p.zone.fractions[ay][0]);
  const order = [...status.peers].sort((a, b) => area2(b) - area2(a));  // smaller projections on top
  // Zones split only along the two axes not drawn project onto the same rectangle: such a stack
  // is drawn as side-by-side slices, one per peer, so that every peer has a zone of its own.
  const key = (p) => [ax, ay].map((d) => p.zone.fractions[d].map((f) => f.toFixed(9)).join(",")).join(";");
  const stacks = new Map();
  for (const peer of order) stacks.set(key(peer), [...(stacks.get(key(peer)) || []), peer]);
  for (const peer of order) {
    const stack = stacks.get(key(peer));
    const slot = stack.indexOf(peer);
    const [fx0, fx1] = peer.zone.fractions[ax];
    const x0 = fx0 + (fx1 - fx0) * slot / stack.length;
    const x1 = fx0 + (fx1 - fx0) * (slot + 1) / stack.length;
    const [y0, y1] = peer.zone.fractions[ay];
    const rect = svg("rect", { class: "zone", "data-peer": peer.id, x: x0 * size, y: (1 - y1) * size,
                               width: Math.max((x1 - x0) * size, 1), height: Math.max((y1 - y0) * size, 1),
                               fill: peer.down ? "#bbb" : colour(peer.quads, most) });
    const tx = peer.zone.text;
    const stacked = stack.length > 1 ? `\n(one of ${stack.length} zones split along the axes not drawn)` : "";
    rect.appendChild(svg("title", {}, `peer ${peer.id} (${peer.address}): ${fmt(peer.quads)} quads${stacked}\n` +
      `${DIMENSIONS[ax]} [${JSON.stringify(tx[ax][0])}, ${tx[ax][1] === null ? "end" : JSON.stringify(tx[ax][1])})\n` +
      `${DIMENSIONS[ay]} [${JSON.stringify(tx[ay][0])}, ${tx[ay][1] === null ? "end" : JSON.stringify(tx[ay][1])})`));
    area.appendChild(rect);
    area.appendChild(svg("text", { class: "label", x: x0 * size + 4, y: (1 - y1) * size + 14 },
                         `${peer.id.slice(0, 6)} · ${fmt(peer.quads)}`));
    if (fx0 > 0 && slot === 0) area.appendChild(svg("text", { x: x0 * size + 2, y: size + 14 }, JSON.stringify(tx[ax][0])));
    if (y0 > 0) area.appendChild(svg("text", { x: -36, y: (1 - y0) * size + 4 }, JSON.stringify(tx[ay][0]).slice(0, 6)));
  }
  area.appendChild(svg("text", { x: size / 2 - 30, y: size + 32 }, DIMENSIONS[ax] + " →"));
  area.appendChild(svg("text", { x: -36, y: -2 }, "↑ " + DIMENSIONS[ay]));
}

function splitAxes(status) {
  // the two dimensions the zones are split along most (the others project zones onto each other)
  const cuts = [0, 1, 2, 3].map((d) => new Set(status.peers.flatMap((p) => p.zone.fractions[d])).size);
  return [0, 1, 2, 3].sort((a, b) => cuts[b] - cuts[a] || a - b).slice(0, 2).sort((a, b) => a - b);
}

function setupAxes() {
  [$("axis-x"), $("axis-y")].forEach((select, which) => {
    DIMENSIONS.forEach((name, i) => select.add(new Option(name, i, false, i === state.axes[which])));
    select.addEventListener("change", () => {
      state.axesChosen = true;
      state.axes[which] = Number(select.value);
      if (state.status) drawZones(state.status);
    });
  });
}

function describe(note) {
  if (note.kind === "bindings" && note.results) {
    return note.results.bindings.map((b) => Object.entries(b).map(([k, v]) => `?${k}=${v.value}`).join(" ")).join(" | ");
  }
  if (note.kind === "event" && note.quads) return `${note.quads.length} quads`;
  if (note.gap) return `notifications ${note.gap[0]}–${note.gap[1]} were dropped`;
  return "";
}

function addNotification(text, error) {
  const item = document.createElement("li");
  item.textContent = text;
  if (error) item.className = "error";
  const list = $("notifications");
  list.prepend(item);
  while (list.children.length > 200) list.lastChild.remove();
}

function subscribe(event) {
  event.preventDefault();
  stop();
  const params = new URLSearchParams({ query: $("sparql").value, kind: $("kind").value });
  if (state.token) params.set("access_token", state.token);
  const source = new EventSource("/subscriptions/stream?" + params);
  state.source = source;
  setState($("live-state"), "subscribing…");
  $("stop").disabled = false;
  source.addEventListener("subscribed", (e) => {
    const info = JSON.parse(e.data);
    setState($("live-state"), `subscription ${info.subscription.slice(0, 8)}… ${info.resumed ? "resumed" : "active"}`,
             "ok");
  });
  source.addEventListener("end", (e) => {
    addNotification("subscription ended: " + JSON.parse(e.data).reason, true);
    stop();
  });
  source.onmessage = (e) => {
    const note = JSON.parse(e.data);
    addNotification(`#${note.sequence} ${note.event} ${describe(note)}`, Boolean(note.error));
  };
  source.onerror = () => {
    if (source.readyState === EventSource.CLOSED) {
      setState($("live-state"), "refused: check the query (or the token)", "bad");
      const asking = new AbortController();  // only to read why the stream was refused
      fetch("/subscriptions/stream?" + params, { headers: headers(), signal: asking.signal }).then(async (reply) => {
        if (reply.ok) { asking.abort(); return; }
        if (reply.status === 401 || reply.status === 403) $("token-form").hidden = false;
        addNotification(`${reply.status}: ${(await reply.text()).trim()}`, true);
      }).catch(() => {});
      stop();
    } else {
      setState($("live-state"), "reconnecting…");
    }
  };
}

function stop() {
  if (state.source) state.source.close();
  state.source = null;
  $("stop").disabled = true;
}

$("token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  state.token = $("token").value.trim();
  sessionStorage.setItem("eventcloud-token", state.token);
  $("token-form").hidden = true;
});
$("subscribe-form").addEventListener("submit", subscribe);
$("stop").addEventListener("click", stop);
setupAxes();
const fromUrl = new URLSearchParams(location.hash.slice(1)).get("token");
if (fromUrl) { state.token = fromUrl; sessionStorage.setItem("eventcloud-token", fromUrl); }
poll();
