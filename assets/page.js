() => {
  /* 1. Ctrl+Enter (Cmd+Enter on a Mac) in any field clicks its main button: a usable button.main-action in the
        field's section (its accordion, else its tab panel), else the nearest button: searching outward from the
        field (its block, form, row, column, accordion, ...) up to its tab panel, the first container holding a
        usable primary or secondary button (never a "stop" one), there its first primary, else its first. Plain
        Enter in a one-line text box does the same when it has no submit event (class has-submit), except for
        the buttons that start or change a training run (those are pressed on purpose).
     2. A click on a glossary word (.gloss, explorer/glossary.py) opens the Glossary tab at its entry.
     3. Links (explorer/serving/links): ?embed=1 (or ?view=<tab>) puts the class embed-mode on <body> (the page's
        chrome hidden: embed.py); BertExplorerLinks.copy makes a Copy link's query a full address, writes it to
        the clipboard and says so on the button (else selects the box that shows it); BertExplorerLinks.run
        presses the button a link names (class link-run-<target>) once it is on the page. */
  if (window.__bertExplorerScript) return [];
  window.__bertExplorerScript = true;

  const GLOSSARY_TAB = "Glossary";
  const NO_PLAIN_ENTER = /^\s*(start|continue run|pause|resume|stop|save checkpoint now)\s*$/i;
  const usable = (el) => el.getClientRects().length > 0 && !el.disabled;

  const params = new URLSearchParams(window.location.search);
  if (/^(1|true|yes|on)$/i.test(params.get("embed") || "") || (params.get("view") || "").trim()) {
    document.body.classList.add("embed-mode");
  }

  function note(button, text) {      // a short confirmation after the button's label (CSS: .copy-link[data-note])
    if (!button) return;
    button.setAttribute("data-note", text);
    clearTimeout(button.__noteTimer);
    button.__noteTimer = setTimeout(() => button.removeAttribute("data-note"), 4000);
  }

  function selectBox(tab, tries) {   // the box shows the link once Gradio has drawn it: select it to copy by hand
    const box = document.querySelector(`#copy-link-box-${tab} input, #copy-link-box-${tab} textarea`);
    if (box) { box.focus(); box.select(); } else if (tries > 0) setTimeout(() => selectBox(tab, tries - 1), 100);
  }

  window.BertExplorerLinks = {
    address(query) {
      const text = String(query || "");
      return text.startsWith("?") ? window.location.origin + window.location.pathname + text : text;
    },
    copy(query, tab) {
      const address = this.address(query);
      const button = document.getElementById(`copy-link-${tab}`);
      const byHand = () => { note(button, "copy it from the box"); selectBox(tab, 20); };
      if (address && navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(address).then(() => note(button, "copied"), byHand);
      } else {
        byHand();
      }
      return address;
    },
    run(target, tries = 100) {
      const button = [...document.querySelectorAll(`button.link-run-${CSS.escape(target)}`)].find(usable);
      if (button) button.click();
      else if (tries > 0) setTimeout(() => this.run(target, tries - 1), 100);
    },
  };

  function mainButton(field) {
    const limit = field.closest("[role=tabpanel]") || document.body;
    const sectionOf = (el) => el.closest(".gr-accordion, [role=tabpanel]") || document.body;
    const section = sectionOf(field);
    const marked = [...section.querySelectorAll("button.main-action")]
      .find((b) => usable(b) && sectionOf(b) === section);
    if (marked) return marked;
    for (let node = field.parentElement; node; node = node.parentElement) {
      const buttons = [...node.querySelectorAll("button.primary, button.secondary")]
        .filter((b) => usable(b) && !b.classList.contains("copy-link"));      // never the Copy link button
      if (buttons.length) {
        return buttons.find((b) => b.classList.contains("primary")) || buttons[0];
      }
      if (node === limit) return null;
    }
    return null;
  }

  function hasSubmit(field) {        // build_app marks the components with a submit event (mark_submit_fields)
    const block = field.closest(".block");
    return !block || block.classList.contains("has-submit");
  }

  function oneLineText(field) {      // not a number box: Enter there is Gradio's (a slider's redraw, a submit)
    if (field.tagName === "INPUT") return ["text", "search"].includes(field.type);
    return field.tagName === "TEXTAREA" && Number(field.rows) === 1;
  }

  document.addEventListener("keydown", (event) => {
    const field = event.target;
    if (event.key !== "Enter" || event.isComposing || event.altKey || !(field instanceof HTMLElement)) return;
    if (!field.matches("textarea, input")) return;
    const chord = event.ctrlKey || event.metaKey;
    if (!chord && (event.shiftKey || !oneLineText(field) || hasSubmit(field))) return;
    const button = mainButton(field);
    if (!button || (!chord && NO_PLAIN_ENTER.test(button.textContent || ""))) return;
    event.preventDefault();             // no newline, and no keypress: a one-line box's own submit stays quiet
    if (chord) event.stopPropagation();     // Gradio reads a one-line box's Enter, Ctrl or not, as its submit
    setTimeout(() => button.click(), 0);
  }, true);

  function glossaryTab() {
    const named = (b) => (b.textContent || "").trim() === GLOSSARY_TAB;
    return [...document.querySelectorAll("[role=tab]")].find(named)
      || [...document.querySelectorAll(".overflow-dropdown button")].find(named);
  }

  function showEntry(anchor, tries) {
    const target = anchor && document.getElementById(anchor);
    if (target && target.getClientRects().length > 0) {
      const row = target.closest("p") || target;
      row.scrollIntoView({ block: "center" });
      row.classList.add("gloss-target");
      setTimeout(() => row.classList.remove("gloss-target"), 2500);
    } else if (tries > 0) {
      setTimeout(() => showEntry(anchor, tries - 1), 100);
    }
  }

  function openEntry(event) {
    const word = event.target instanceof Element && event.target.closest(".gloss");
    if (!word || (event.type === "keydown" && event.key !== "Enter" && event.key !== " ")) return;
    const tab = glossaryTab();
    if (!tab) return;
    event.preventDefault();
    tab.click();
    const anchor = word.getAttribute("data-gloss")      // Markdown drops data- attributes: then the class
      || [...word.classList].find((name) => name.startsWith("gloss-") && name !== "gloss-target");
    showEntry(anchor, 40);
  }
  document.addEventListener("click", openEntry, true);
  document.addEventListener("keydown", openEntry, true);
  // The sanitizer drops tabindex too: glossary words become focusable (Tab, then Enter) as they appear.
  const focusable = () => document.querySelectorAll(".gloss:not([tabindex])").forEach((w) => {
    w.setAttribute("tabindex", "0");
    w.setAttribute("role", "button");
  });
  focusable();
  new MutationObserver(focusable).observe(document.body, { subtree: true, childList: true });
  return [];
}
