// The book's two additions to a lesson page: a figure opens full size when clicked (a phone can then zoom it), and
// sits in a box of its own that scrolls sideways where the figure is drawn wider than a phone's column; and
// a reference trace opens in the Perfetto UI through its documented way of opening a trace from another page:
// open https://ui.perfetto.dev, send "PING" until it answers "PONG", then post the trace's bytes.
"use strict";
const PERFETTO = "https://ui.perfetto.dev";
// A figure's smallest text is 9 pt at 100 dpi, 12.5 of its own pixels; drawn at this share of its width or more, it
// stays 7 px high or more (scripts/check_pages.py checks it).
const LEAST_SCALE = 0.57;

function keepLegible(img) {
  const least = () => { img.style.minWidth = `${Math.ceil(img.naturalWidth * LEAST_SCALE)}px`; };
  if (img.complete && img.naturalWidth) least();
  else img.addEventListener("load", least, {once: true});
}

document.addEventListener("DOMContentLoaded", () => {
  for (const img of document.querySelectorAll("div.cell_output img")) {
    if (img.closest("a")) continue;
    const link = document.createElement("a");
    link.href = img.src;
    link.target = "_blank";
    link.rel = "noopener";
    link.title = "Open the figure full size";
    const box = document.createElement("div");
    box.className = "asynclab-figure";
    img.replaceWith(box);
    box.appendChild(link);
    link.appendChild(img);
    keepLegible(img);
  }
  for (const pre of document.querySelectorAll("div.cell_output div.output pre")) keepTables(pre);
});

// A printed table (rows of up to TABLE_CHARS characters whose columns are set apart by two spaces or more) keeps its
// columns on a phone: its rows scroll sideways together instead of wrapping, as the lines around them do.
const TABLE_CHARS = 72;
const TABULAR = /\S {2,}\S|\S {2,}$/;

function keepTables(pre) {
  if ([...pre.children].some((child) => child.textContent)) return;  // coloured output: left as it is
  const lines = pre.textContent.split("\n");
  const table = (line) => line.length <= TABLE_CHARS && TABULAR.test(line);
  if (!lines.some(table)) return;
  pre.textContent = "";
  for (let i = 0; i < lines.length;) {
    let j = i;
    while (j < lines.length && table(lines[j])) j++;
    if (j - i >= 2) {  // two rows or more: a table
      const rows = document.createElement("span");
      rows.className = "asynclab-rows";
      rows.textContent = lines.slice(i, j).join("\n");
      pre.append(rows);
      i = j;
    } else {
      pre.append(lines[i] + (i + 1 < lines.length ? "\n" : ""));
      i++;
    }
  }
}

async function openInPerfetto(button) {
  const ui = window.open(PERFETTO);
  if (!ui) {
    button.textContent = "Allow pop-ups for this page to open Perfetto";
    return;
  }
  const response = await fetch(button.dataset.trace);
  const buffer = await response.arrayBuffer();
  const ping = setInterval(() => ui.postMessage("PING", PERFETTO), 50);
  const answered = (event) => {
    if (event.origin !== PERFETTO || event.data !== "PONG") return;
    clearInterval(ping);
    window.removeEventListener("message", answered);
    ui.postMessage({perfetto: {buffer: buffer, title: button.dataset.title,
                               fileName: button.dataset.trace.split("/").pop()}}, PERFETTO);
  };
  window.addEventListener("message", answered);
}

document.addEventListener("click", (event) => {
  const button = event.target.closest("button.asynclab-perfetto");
  if (button) openInPerfetto(button);
});
