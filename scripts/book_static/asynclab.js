// The book's two additions to a lesson page: a figure opens full size when clicked (a phone can then zoom it), and
// a reference trace opens in the Perfetto UI through its documented way of opening a trace from another page:
// open https://ui.perfetto.dev, send "PING" until it answers "PONG", then post the trace's bytes.
"use strict";
const PERFETTO = "https://ui.perfetto.dev";

document.addEventListener("DOMContentLoaded", () => {
  for (const img of document.querySelectorAll("div.cell_output img")) {
    if (img.closest("a")) continue;
    const link = document.createElement("a");
    link.href = img.src;
    link.target = "_blank";
    link.rel = "noopener";
    link.title = "Open the figure full size";
    img.replaceWith(link);
    link.appendChild(img);
  }
});

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
