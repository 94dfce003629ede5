// Small DOM helpers. Text is always set as text (never parsed as HTML): names of files, email bodies and
// error messages come from outside.

/** An element: `h('p', {class: 'x'}, 'text', child)`. `on*` props become listeners. */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2), value);
    else if (key === 'class') el.className = value;
    else if (key in el && typeof value !== 'string') el[key] = value;
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

let nextId = 0;

/** A labelled input: `field('Email', {name: 'email', type: 'email', required: true})`. */
export function field(label, attrs = {}, hint) {
  const id = `f${++nextId}`;
  const hintId = hint ? `${id}-hint` : undefined;
  return h(
    'div',
    { class: 'field' },
    h('label', { for: id }, label),
    h('input', { id, ...attrs, 'aria-describedby': hintId }),
    hint ? h('p', { class: 'hint', id: hintId }, hint) : null,
  );
}

/** The message of an error from the API (api.js ApiError) or anything else. */
export function describe(err) {
  if (err && typeof err === 'object' && 'status' in err) {
    const code = err.code ? ` (${err.code})` : '';
    return `${err.message}${code}`;
  }
  return String(err?.message ?? err);
}

/**
 * A form whose submit runs `action(values, form)`: the button is disabled while it runs, and an error is
 * shown in the form's alert line. `action` returns a message to show, or nothing.
 */
export function form(props, fields, submitLabel, action, extra = []) {
  const alert = h('p', { class: 'alert', role: 'alert' });
  const done = h('p', { class: 'done', role: 'status' });
  const button = h('button', { type: 'submit' }, submitLabel);
  const el = h(
    'form',
    { ...props, novalidate: false },
    fields,
    h('div', { class: 'actions' }, button, extra),
    alert,
    done,
  );
  el.addEventListener('submit', async (event) => {
    event.preventDefault();
    alert.textContent = '';
    done.textContent = '';
    const values = Object.fromEntries(new FormData(el).entries());
    button.disabled = true;
    el.setAttribute('aria-busy', 'true');
    try {
      const message = await action(values, el, event.submitter);
      if (typeof message === 'string') done.textContent = message;
    } catch (err) {
      alert.textContent = describe(err);
    } finally {
      button.disabled = false;
      el.removeAttribute('aria-busy');
    }
  });
  return el;
}

/** A titled section of a page. */
export function section(title, ...children) {
  const id = `s${++nextId}`;
  return h('section', { class: 'card', 'aria-labelledby': id }, h('h2', { id }, title), ...children);
}

/** A section alone on its page (a landing page's single form), kept to a readable width. */
export function narrowSection(title, ...children) {
  const el = section(title, ...children);
  el.classList.add('narrow');
  return el;
}

/** Bytes as a person reads them. */
export function size(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}
