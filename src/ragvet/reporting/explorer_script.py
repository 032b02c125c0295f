"""The case explorer's own script and style: static text, the same for every report, so
the page's Content-Security-Policy can allow exactly this script by its hash.

The script reads the cases from the page's ``<script type="application/json">`` block
and builds every element with DOM calls; user text only ever goes in through
``textContent``, so no value can become markup. The table renders only the rows in
view (a fixed row height, spacer rows above and below), which keeps 100,000 cases as
quick to scroll, sort and filter as 181.
"""

from __future__ import annotations

import base64
import hashlib

STYLE = """
#ragvet-explorer { width: 96vw; margin-left: calc(50% - 48vw); }
#ragvet-explorer .rx-controls { display: flex; flex-wrap: wrap; gap: 0.5em 1em; align-items: center; margin: 0.5em 0; }
#ragvet-explorer .rx-scroll { height: 420px; overflow: auto; border: 1px solid #d0d7de; }
#ragvet-explorer .rx-scroll table { margin: 0; width: 100%; table-layout: fixed; font-size: 12.5px; }
#ragvet-explorer .rx-scroll th { position: sticky; top: 0; cursor: pointer; user-select: none; overflow-wrap: anywhere;
       padding: 2px 4px; vertical-align: bottom; }
#ragvet-explorer .rx-scroll th:first-child { width: 14em; }
#ragvet-explorer .rx-scroll th:nth-child(2) { width: 7.5em; }
#ragvet-explorer .rx-scroll td { height: 23px; padding: 0 4px; white-space: nowrap; overflow: hidden;
       text-overflow: ellipsis; }
#ragvet-explorer .rx-scroll tr.rx-row { cursor: pointer; }
#ragvet-explorer .rx-scroll tr.rx-row:hover { background: #f6f8fa; }
#ragvet-explorer .rx-scroll tr.rx-chosen { background: #ddf4ff; }
#ragvet-explorer .rx-s0 { color: #cf222e; font-weight: 600; }
#ragvet-explorer .rx-s1 { color: #1a7f37; font-weight: 600; }
#ragvet-explorer .rx-sides { display: grid; grid-template-columns: 1fr 1fr; gap: 1em; }
#ragvet-explorer .rx-side ol { padding-left: 1.5em; }
#ragvet-explorer .rx-chunk { white-space: pre-wrap; font: 12px/1.4 ui-monospace, monospace; background: #f6f8fa;
       padding: 4px 6px; margin: 2px 0 8px; max-height: 16em; overflow: auto; }
#ragvet-explorer mark { background: #fff8c5; outline: 1px solid #d4a72c; }
#ragvet-explorer .rx-note { color: #59636e; }
"""

SCRIPT = r"""
(() => {
"use strict";
const D = JSON.parse(document.getElementById("ragvet-cases").textContent);
const ROW = 24, EXTRA = 12;
const STATUS = ["newly missed", "newly found", "unchanged"];
const n = D.ids.length;
const $ = id => document.getElementById(id);
const el = (tag, text, cls) => {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
};
const fmt = (v, whole) => v === null || v === undefined ? "\u2014" : whole ? String(v) : v.toFixed(3);
const state = {config: 0, status: "", slice: "", search: "", sort: null, desc: false, chosen: -1, view: null};
let lowered = null;  // id and question in lower case, built on the first search

const configSelect = $("rx-config"), statusSelect = $("rx-status"), sliceSelect = $("rx-slice");
const search = $("rx-search"), body = $("rx-body"), scroller = $("rx-table");
D.configs.forEach((name, i) => { const o = el("option", name); o.value = String(i); configSelect.append(o); });
STATUS.forEach((name, i) => { const o = el("option", name); o.value = String(i); statusSelect.append(o); });
D.slices.forEach((slice, s) => {
  const values = [...new Set(D.tags.map(t => t[s]))].sort();
  for (const value of values) {
    const o = el("option", slice + "=" + value); o.value = s + "\u0000" + value; sliceSelect.append(o);
  }
});

const columns = [
  {title: "case", key: i => D.ids[i], text: i => D.ids[i]},
  {title: "status", key: i => D.status[state.config][i], text: i => STATUS[D.status[state.config][i]],
   cls: i => "rx-s" + D.status[state.config][i]},
  ...D.slices.map((slice, s) => ({title: slice, key: i => D.tags[i][s], text: i => D.tags[i][s]})),
  ...D.columns.map((name, c) => ({
    title: name === "first_rank" ? "evidence rank" : name,
    key: i => { const r = D.rows[state.config][i], b = r[2 * c], v = r[2 * c + 1];
                return b === null || v === null ? null : v - b; },
    text: i => { const r = D.rows[state.config][i], whole = name === "first_rank";
                 return fmt(r[2 * c], whole) + " \u2192 " + fmt(r[2 * c + 1], whole); },
  })),
];

function head() {
  const row = $("rx-head");
  row.replaceChildren();
  columns.forEach((column, c) => {
    const th = el("th", column.title + (state.sort === c ? (state.desc ? " \u25bc" : " \u25b2") : ""));
    th.title = column.title + (c > 1 + D.slices.length ? ", baseline \u2192 candidate: sorts by the change" : "");
    th.addEventListener("click", () => {
      state.desc = state.sort === c ? !state.desc : false;
      state.sort = c;
      apply();
    });
    row.append(th);
  });
}

function apply() {
  const status = state.status === "" ? -1 : Number(state.status);
  const [slice, value] = state.slice === "" ? [-1, null] : [Number(state.slice.split("\u0000")[0]),
                                                           state.slice.slice(state.slice.indexOf("\u0000") + 1)];
  const needle = state.search.trim().toLowerCase();
  if (needle && lowered === null) lowered = D.ids.map((id, i) => (id + "\n" + D.questions[i]).toLowerCase());
  const statuses = D.status[state.config];
  const view = [];
  for (let i = 0; i < n; i++) {
    if (status >= 0 && statuses[i] !== status) continue;
    if (slice >= 0 && D.tags[i][slice] !== value) continue;
    if (needle && !lowered[i].includes(needle)) continue;
    view.push(i);
  }
  if (state.sort === null) {
    view.sort((a, b) => statuses[a] - statuses[b] || a - b);
  } else {
    const key = columns[state.sort].key, sign = state.desc ? -1 : 1;
    const keys = new Map(view.map(i => [i, key(i)]));
    view.sort((a, b) => {
      const x = keys.get(a), y = keys.get(b);
      if (x === y) return a - b;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return (x < y ? -1 : 1) * sign;
    });
  }
  state.view = view;
  $("rx-count").textContent = view.length + " of " + n + " cases";
  head();
  scroller.scrollTop = 0;
  render();
}

function spacer(height) {
  const tr = el("tr"), td = el("td");
  td.colSpan = columns.length;
  td.style.height = height + "px";
  td.style.padding = "0";
  td.style.border = "0";
  tr.append(td);
  return tr;
}

function render() {
  const view = state.view;
  const first = Math.max(0, Math.floor(scroller.scrollTop / ROW) - EXTRA);
  const last = Math.min(view.length, Math.ceil((scroller.scrollTop + scroller.clientHeight) / ROW) + EXTRA);
  const rows = [spacer(first * ROW)];
  for (let p = first; p < last; p++) {
    const i = view[p], tr = el("tr", null, "rx-row" + (i === state.chosen ? " rx-chosen" : ""));
    tr.dataset.case = D.ids[i];
    tr.tabIndex = 0;
    for (const column of columns) tr.append(el("td", column.text(i), column.cls ? column.cls(i) : ""));
    tr.addEventListener("click", () => choose(i));
    tr.addEventListener("keydown", event => { if (event.key === "Enter") choose(i); });
    rows.push(tr);
  }
  rows.push(spacer((view.length - last) * ROW));
  body.replaceChildren(...rows);
}

function target(t) {  // [doc, start, end, quote] with the doc's name
  return {doc: D.docs[t[0]], start: t[1], end: t[2], quote: t[3]};
}

function describe(t) {
  const item = el("li");
  item.append(el("code", t.doc));
  if (t.start === null) item.append(el("span", " (any chunk of the doc)"));
  else { item.append(el("span", " [" + t.start + ":" + t.end + "] ")); item.append(el("q", t.quote)); }
  return item;
}

function marked(chunk, targets) {  // the chunk's text, each evidence character inside a <mark>
  const [, doc, start, end, text] = chunk;
  const spans = [];
  for (const t of targets) {
    if (t[0] !== doc) continue;
    if (t[1] === null) spans.push([0, end - start]);
    else if (t[1] < end && t[2] > start) spans.push([Math.max(t[1], start) - start, Math.min(t[2], end) - start]);
  }
  spans.sort((a, b) => a[0] - b[0]);
  const block = el("div", null, "rx-chunk");
  let at = 0;
  for (const [lo, hi] of spans) {
    if (hi <= at) continue;
    const from = Math.max(lo, at);
    if (from > at) block.append(document.createTextNode(text.slice(at, from)));
    block.append(el("mark", text.slice(from, hi)));
    at = hi;
  }
  if (at < text.length) block.append(document.createTextNode(text.slice(at)));
  return {block, hit: spans.length > 0};
}

function side(i, which) {
  const box = el("div", null, "rx-side");
  box.dataset.side = which ? "candidate" : "baseline";
  const title = which ? "Candidate (this change)" : "Baseline (" + D.baseline + ")";
  const top = D.top[state.config][which];
  if (top === null) {
    box.append(el("h4", title));
    box.append(el("p", "The " + (which ? "candidate" : "baseline") + "'s chunks are unavailable: " +
                       D.unavailable[state.config][which], "rx-note rx-unavailable"));
    return box;
  }
  const pairs = top[i] || [], targets = D.evidence[i];
  const list = el("ol");
  let arrived = 0;
  for (let p = 0; p < pairs.length; p += 2) {
    const chunk = D.chunks[pairs[p]], {block, hit} = marked(chunk, targets);
    if (hit && !arrived) arrived = p / 2 + 1;
    const item = el("li");
    item.dataset.rank = String(p / 2 + 1);
    item.append(el("code", chunk[0]), el("span", " score " + pairs[p + 1] + (hit ? " \u2014 holds evidence" : "")));
    item.append(block);
    list.append(item);
  }
  const heading = el("h4", title + ": " + (targets.length === 0 ? "no evidence to find" :
                     arrived ? "evidence at rank " + arrived : "evidence not in top " + D.k));
  heading.className = "rx-arrival";
  box.append(heading, list);
  return box;
}

function choose(i) {
  state.chosen = i;
  const detail = $("rx-detail");
  const parts = [el("h3", D.ids[i]), el("p", D.questions[i], "rx-question")];
  parts.push(el("p", D.slices.map((s, k) => s + "=" + D.tags[i][k]).join(", "), "rx-note"));
  const targets = D.evidence[i].map(target);
  if (D.claims[i].length) {
    parts.push(el("h4", "Claims"));
    const claims = el("ol");
    for (const [text, refs] of D.claims[i]) {
      const item = el("li", text), sub = el("ul");
      refs.forEach(r => sub.append(describe(targets[r])));
      item.append(sub);
      claims.append(item);
    }
    parts.push(claims);
  }
  parts.push(el("h4", "Evidence"));
  const evidence = el("ol");
  targets.forEach(t => evidence.append(describe(t)));
  const none = "None: an abstention case (the corpus does not answer it).";
  parts.push(targets.length ? evidence : el("p", none, "rx-note"));
  parts.push(el("h4", D.configs[state.config] + ": top " + D.k + ", baseline beside candidate"));
  const sides = el("div", null, "rx-sides");
  sides.append(side(i, 0), side(i, 1));
  parts.push(sides);
  detail.replaceChildren(...parts);
  render();
}

configSelect.addEventListener("change", () => { state.config = Number(configSelect.value); apply();
                                                if (state.chosen >= 0) choose(state.chosen); });
statusSelect.addEventListener("change", () => { state.status = statusSelect.value; apply(); });
sliceSelect.addEventListener("change", () => { state.slice = sliceSelect.value; apply(); });
search.addEventListener("input", () => { state.search = search.value; apply(); });
let pending = false;
scroller.addEventListener("scroll", () => {
  if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; render(); }); }
});

// Each configuration's rows in the report's tables link to its cases.
for (const code of document.querySelectorAll("table td:first-child code")) {
  const c = D.configs.indexOf(code.textContent);
  if (c < 0 || code.closest("#ragvet-explorer")) continue;
  const link = el("a", "cases", "rx-link");
  link.href = "#ragvet-explorer";
  link.addEventListener("click", () => { configSelect.value = String(c); state.config = c; apply(); });
  code.after(document.createTextNode(" "), link);
}

const moved = D.status.map(s => [s.filter(v => v === 0).length, s.filter(v => v === 1).length]);
const shown = D.listed ? n + " of " + D.listed + " eval cases shown, the newly missed and found first " +
  "(the moves CSV, ragvet report --moves, lists every case). " : n + " eval cases. ";
$("rx-summary").textContent = shown + D.configs.map((name, c) =>
  name + ": " + moved[c][0] + " newly missed, " + moved[c][1] + " newly found at hit@" + D.k).join("; ") +
  ". Each figure reads baseline \u2192 candidate (evidence rank: where the first chunk holding evidence came in the " +
  "run). Choose a case for its evidence and each side's top " + D.k + ".";
apply();
performance.mark("ragvet-explorer-ready");
})();
"""


def script_hash(script: str = SCRIPT) -> str:
    """The Content-Security-Policy source that allows exactly ``script`` inline."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii") + "'"
