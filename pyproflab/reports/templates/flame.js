/* pyproflab flame graphs: self-contained, offline, no dependency.
 * Draws every div of class pyproflab-flame holding a JSON script element with
 * {title, unit, total, names, nodes: [[name, parent, value, base?]], diff}.
 * Root on top; colour by package (or by change in a differential graph); labels
 * truncated to the frame; click a frame to zoom (click the root to zoom out);
 * search highlights matches and prints their share; "sandwich" shows the callers
 * and callees of the last clicked function. Names only ever reach the page as
 * textContent, never as markup. */
(function () {
  if (!window.pyproflabFlame) {
    const NS = "http://www.w3.org/2000/svg";
    const ROW = 18, FONT = 11, CHAR = 6.6;
    const make = (tag, attrs, parent, ns) => {
      const e = ns === false ? document.createElement(tag) : document.createElementNS(NS, tag);
      for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
      if (parent) parent.appendChild(e);
      return e;
    };
    const pkg = (name) => {
      const n = name.split("[")[0].split("(")[0] || name;
      if (n.includes("::")) return n.split("::")[0];
      const slash = n.lastIndexOf("/");
      const dot = n.indexOf(".", slash + 1);
      return dot < 0 ? n : n.slice(0, dot);
    };
    const hue = (s) => {
      let h = 0;
      for (let i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) >>> 0;
      return h % 360;
    };
    const human = (v, unit) => {
      const a = Math.abs(v), sign = v < 0 ? "-" : "";
      const fmt = (x) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
      if (/^(nanoseconds?|ns)$/.test(unit)) {
        for (const [f, u] of [[1e9, "s"], [1e6, "ms"], [1e3, "us"]]) if (a >= f) return sign + fmt(a / f) + " " + u;
        return sign + a + " ns";
      }
      if (/^(bytes?|B)$/.test(unit)) {
        const us = ["B", "KiB", "MiB", "GiB", "TiB"];
        let i = 0, x = a;
        while (x >= 1024 && i < us.length - 1) { x /= 1024; i++; }
        return sign + (i ? fmt(x) : x) + " " + us[i];
      }
      return sign + (a >= 1e6 ? fmt(a / 1e6) + "M" : a >= 1e4 ? fmt(a / 1e3) + "k" : String(a)) + (unit && unit !== "count" ? " " + unit : "");
    };
    const pct = (x) => (x * 100).toFixed(x < 0.001 ? 3 : 1) + "%";

    // Nodes -> tree with children sorted by value (widest first).
    function tree(names, nodes) {
      const all = nodes.map((n, i) => ({ i, name: names[n[0]], parent: n[1], value: n[2], base: n.length > 3 ? n[3] : null, kids: [] }));
      for (const n of all) if (n.parent >= 0) all[n.parent].kids.push(n);
      for (const n of all) n.kids.sort((a, b) => b.value - a.value);
      return all[0];
    }
    function layout(root) {
      const rows = [];
      (function walk(n, x, depth, up) {
        n.x = x; n.depth = depth; n.up = up;
        rows.push(n);
        let cx = x;
        for (const k of n.kids) { walk(k, cx, depth + 1, n); cx += k.value; }
      })(root, 0, 0, null);
      return rows;
    }
    function diffColour(n) {
      if (n.base === null) return "#ccc";
      if (n.base === 0) return n.value > 0 ? "rgb(200,30,30)" : "#ddd";
      const rel = Math.max(-1, Math.min(1, (n.value - n.base) / n.base));
      const t = Math.abs(rel);
      return rel >= 0
        ? `rgb(${Math.round(235 - 35 * t)},${Math.round(235 - 205 * t)},${Math.round(235 - 205 * t)})`
        : `rgb(${Math.round(235 - 205 * t)},${Math.round(235 - 135 * t)},${Math.round(235 - 15 * t)})`;
    }

    function draw(host) {
      if (host.dataset.drawn) return;
      const src = host.querySelector("script[type='application/json']");
      if (!src) return;
      const data = JSON.parse(src.textContent);
      host.dataset.drawn = "1";
      const root = tree(data.names, data.nodes);
      const rows = layout(root);
      const ui = make("div", { class: "pf-bar" }, host, false);
      const title = make("b", {}, ui, false);
      title.textContent = data.title + "  ";
      const search = make("input", { type: "search", placeholder: "search (regex)", class: "pf-search" }, ui, false);
      const reset = make("button", { type: "button", class: "pf-reset" }, ui, false);
      reset.textContent = "reset zoom";
      const sandwich = make("button", { type: "button", class: "pf-sandwich", disabled: "" }, ui, false);
      sandwich.textContent = "sandwich";
      const info = make("span", { class: "pf-match" }, ui, false);
      const svgHost = make("div", { class: "pf-graph" }, host, false);
      const extra = make("div", { class: "pf-sandwich-view" }, host, false);
      const hover = make("div", { class: "pf-hover" }, host, false);
      const state = { focus: root, rx: null, picked: null };

      function render(into, rootNode, rowsOf, focus, flip) {
        into.textContent = "";
        const W = Math.max(300, host.clientWidth || 1000);
        const depth = rowsOf.reduce((d, n) => Math.max(d, n.depth), 0) + 1;
        const H = depth * ROW + (data.diff ? 34 : 4);
        const svg = make("svg", { class: "main-svg pyproflab-flame-svg", width: W, height: H, "font-size": FONT, "font-family": "system-ui,sans-serif" }, into);
        const x0 = focus.x, span = focus.value || 1;
        const ancestors = new Set();
        for (let a = focus; a; a = a.up) ancestors.add(a);
        for (const n of rowsOf) {
          const inside = n.x >= x0 && n.x + n.value <= x0 + span + 1e-9;
          if (!inside && !ancestors.has(n)) continue;
          const x = ancestors.has(n) && n !== focus ? 0 : ((n.x - x0) / span) * W;
          const w = ancestors.has(n) && n !== focus ? W : (n.value / span) * W;
          if (w < 0.5) continue;
          const y = flip ? (depth - 1 - n.depth) * ROW : n.depth * ROW;
          const g = make("g", { class: "pf-frame", transform: `translate(${x.toFixed(1)},${y})` }, svg);
          g.__node = n;
          const matched = state.rx && n.up !== null && state.rx.test(n.name);
          const fill = matched ? "#e040fb" : n.up === null ? "#bbb" : data.diff ? diffColour(n) : `hsl(${hue(pkg(n.name))},55%,${ancestors.has(n) && n !== focus ? 82 : 68}%)`;
          make("rect", { width: Math.max(0, w - 1).toFixed(1), height: ROW - 1, fill, rx: 2, class: matched ? "pf-hit" : "" }, g);
          const tip = make("title", {}, g);
          let tipText = `${n.name}\n${human(n.value, data.unit)} (${pct(n.value / (data.total || 1))} of total)`;
          if (data.diff && n.base !== null) tipText += `\nbase ${human(n.base, data.unit)} -> ${human(n.value, data.unit)}` + (n.base ? ` (${n.value >= n.base ? "+" : ""}${pct((n.value - n.base) / n.base)})` : " (new)");
          tip.textContent = tipText;
          const fit = Math.floor((w - 6) / CHAR);
          if (fit >= 3) {
            const t = make("text", { x: 3, y: ROW - 5, fill: "#111" }, g);
            t.textContent = n.name.length <= fit ? n.name : n.name.slice(0, fit - 1) + "\u2026";
          }
          g.addEventListener("mouseenter", () => { hover.textContent = tipText.replace(/\n/g, " | "); });
          g.addEventListener("click", () => {
            state.picked = n.up ? n.name : null;
            if (state.picked) sandwich.removeAttribute("disabled"); else sandwich.setAttribute("disabled", "");
            if (into === svgHost) { state.focus = n === focus && n.up ? n.up : n; update(); }
          });
        }
        if (data.diff) legend(svg, W, H);
        return svg;
      }
      function legend(svg, W, H) {
        const g = make("g", { class: "pf-legend", transform: `translate(${W - 330},${H - 26})` }, svg);
        const steps = 11;
        for (let i = 0; i < steps; i++) {
          const rel = -1 + (2 * i) / (steps - 1);
          make("rect", { x: 60 + i * 18, y: 0, width: 18, height: 10, fill: diffColour({ base: 1, value: 1 + rel }) }, g);
        }
        const labels = [[20, "less"], [60, "-100%"], [153, "0"], [230, "+100%"], [284, "more"]];
        for (const [x, s] of labels) { const t = make("text", { x, y: 22, "font-size": 10 }, g); t.textContent = s; }
      }
      function matchShare() {
        if (!state.rx) { info.textContent = ""; return; }
        let sum = 0, count = 0;
        (function walk(n, inMatch) {
          const m = n.up !== null && state.rx.test(n.name);
          if (m && !inMatch) { sum += n.value; count++; }
          for (const k of n.kids) walk(k, inMatch || m);
        })(root, false);
        info.textContent = `matched: ${pct(sum / (data.total || 1))} of total (${count} frames)`;
        info.dataset.share = String(sum / (data.total || 1));
      }
      function update() { render(svgHost, root, rows, state.focus, false); matchShare(); host.dataset.root = state.focus.name; }
      search.addEventListener("input", () => {
        const q = search.value;
        try { state.rx = q ? new RegExp(q, "i") : null; } catch (e) { state.rx = new RegExp(q.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), "i"); }
        update();
      });
      reset.addEventListener("click", () => { state.focus = root; update(); });
      sandwich.addEventListener("click", () => showSandwich(state.picked));

      function showSandwich(name) {
        extra.textContent = "";
        if (!name) return;
        const top = [];
        (function walk(n, inside) {
          const hit = n.up !== null && n.name === name;
          if (hit && !inside) top.push(n);
          for (const k of n.kids) walk(k, inside || hit);
        })(root, false);
        const mk = (nm, value) => ({ name: nm, value, base: null, kids: [], up: null });
        const total = top.reduce((s, n) => s + n.value, 0);
        const callees = mk(name, total), callers = mk(name, total);
        const add = (parent, nm, value) => {
          let k = parent.kids.find((c) => c.name === nm);
          if (!k) { k = mk(nm, 0); k.up = parent; parent.kids.push(k); }
          k.value += value;
          return k;
        };
        const merge = (into, from) => { for (const k of from.kids) merge(add(into, k.name, k.value), k); };
        for (const n of top) {
          merge(callees, n);
          let at = callers;
          for (let a = n.up; a && a.up; a = a.up) at = add(at, a.name, n.value);
        }
        for (const [label, t, flip] of [["callers of", callers, true], ["callees of", callees, false]]) {
          const h = make("div", { class: "pf-sandwich-title" }, extra, false);
          h.textContent = `${label} ${name}: ${human(total, data.unit)} (${pct(total / (data.total || 1))})`;
          (function sortKids(n) { n.kids.sort((a, b) => b.value - a.value); n.kids.forEach(sortKids); })(t);
          const box = make("div", {}, extra, false);
          render(box, t, layout(t), t, flip);
        }
      }
      update();
    }
    window.pyproflabFlame = {
      draw,
      drawAll() { document.querySelectorAll(".pyproflab-flame").forEach(draw); },
    };
    const style = document.createElement("style");
    style.textContent = ".pyproflab-flame{font:12px system-ui,sans-serif;margin:6px 0}.pf-bar{margin:4px 0}.pf-bar>*{margin-right:8px}.pf-frame{cursor:pointer}.pf-frame:hover rect{stroke:#333}.pf-hover{color:#555;min-height:1.4em;font-size:11px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}.pf-sandwich-title{font-weight:bold;margin-top:8px}.pf-match{color:#8a1f9a}";
    document.head.appendChild(style);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", () => window.pyproflabFlame.drawAll());
  } else {
    window.pyproflabFlame.drawAll();
  }
})();
