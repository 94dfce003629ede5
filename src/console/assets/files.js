// The files page: a folder's files with thumbnails (the storage route's image transformation), upload,
// download, metadata and delete. Storage requests carry the session cookie like any same-origin request.
import { api, fresh, me, session, storagePath } from './api.js';
import { describe, field, form, h, section, size } from './dom.js';

let folder;

/** Whether `path` (a folder) may be written in, by the folders the rules allow. */
function writableIn(path, writable) {
  return writable.some((w) => (w.nested ? path.startsWith(w.folder) : path === w.folder));
}

/**
 * The folder an upload goes to by default: the open folder when the rules allow it, else the first
 * allowed folder inside it (public/ → public/<id>/), else the first allowed one.
 */
function uploadFolder(path, writable) {
  if (writableIn(path, writable)) return path;
  return (writable.find((w) => w.folder.startsWith(path)) ?? writable[0])?.folder;
}

/** The allowed folders in a sentence: "directly in user/x/, or anywhere under public/x/". */
function whereToWrite(writable) {
  if (writable.length === 0) return 'The storage rules let you write nowhere.';
  const parts = writable.map((w) => (w.nested ? `anywhere under ${w.folder}` : `directly in ${w.folder}`));
  return `The storage rules let you write files ${parts.join(', or ')}.`;
}

function thumbnail(file, name) {
  const type = file.ContentType;
  // SVG is served as an attachment (active content), and the transformation reads raster images only.
  if (type.startsWith('image/') && type !== 'image/svg+xml') {
    const src = `${storagePath('o', file.key)}?w=240&v=${encodeURIComponent(file.ETag)}`;
    return h('img', { class: 'thumb', src, alt: name, loading: 'lazy', width: 240, height: 160 });
  }
  const ext = name.includes('.') ? name.slice(name.lastIndexOf('.') + 1).toUpperCase() : 'FILE';
  return h('div', { class: 'thumb placeholder', 'aria-hidden': 'true' }, ext.slice(0, 5));
}

function fileCard(file, name, reload, announce) {
  const details = h('pre', {
    class: 'metadata',
    hidden: true,
    tabindex: '0',
    'aria-label': `Metadata of ${name}`,
  });
  const confirm = h('div', { class: 'confirm', hidden: true });
  const showMetadata = async (event) => {
    const button = event.currentTarget;
    if (!details.hidden) {
      details.hidden = true;
      button.setAttribute('aria-expanded', 'false');
      return;
    }
    await fresh();
    try {
      details.textContent = JSON.stringify(await api('GET', storagePath('m', file.key)), null, 2);
    } catch (err) {
      details.textContent = describe(err);
    }
    details.hidden = false;
    button.setAttribute('aria-expanded', 'true');
  };
  const askDelete = () => {
    confirm.replaceChildren(
      h('span', {}, `Delete ${name}?`),
      h(
        'button',
        {
          type: 'button',
          class: 'danger',
          onclick: async () => {
            await fresh();
            try {
              await api('DELETE', storagePath('o', file.key));
              await reload();
              announce(`Deleted ${name}.`);
            } catch (err) {
              announce(describe(err));
            }
          },
        },
        'Delete',
      ),
      h('button', { type: 'button', class: 'secondary', onclick: () => (confirm.hidden = true) }, 'Cancel'),
    );
    confirm.hidden = false;
    confirm.querySelector('button')?.focus();
  };
  return h(
    'li',
    { class: 'file card' },
    h(
      'figure',
      {},
      thumbnail(file, name),
      h(
        'figcaption',
        {},
        h('span', { class: 'name' }, name),
        h('span', { class: 'meta' }, `${size(file.ContentLength)} · ${file.ContentType}`),
      ),
    ),
    h(
      'div',
      { class: 'actions small' },
      h('a', { class: 'button secondary', href: storagePath('o', file.key), download: name }, 'Download'),
      h(
        'button',
        { type: 'button', class: 'secondary', 'aria-expanded': 'false', onclick: showMetadata },
        'Metadata',
      ),
      h('button', { type: 'button', class: 'secondary', onclick: askDelete }, 'Delete'),
    ),
    confirm,
    details,
  );
}

export async function filesPage(ctx) {
  const s = session();
  if (!ctx.settings.storage)
    return h(
      'div',
      { class: 'page' },
      h('h1', { tabindex: '-1' }, 'Files'),
      h('p', {}, 'Storage is off (STORAGE_ENABLED=false).'),
    );
  if (!s)
    return h(
      'div',
      { class: 'page' },
      h('h1', { tabindex: '-1' }, 'Files'),
      h('p', {}, 'Sign in first. ', h('a', { href: '#/sign-in' }, 'Sign in')),
    );
  const { writable } = await me();
  const home = uploadFolder(`user/${s.user.id}/`, writable) ?? `user/${s.user.id}/`;
  if (!folder?.startsWith('user/') && !folder?.startsWith('public')) folder = home;

  const status = h('p', { class: 'done', role: 'status' });
  const announce = (text) => {
    status.textContent = text;
  };
  const list = h('ul', { class: 'grid', 'aria-label': 'Files' });
  const heading = h('h2', { id: 'folder-heading' }, folder);

  const reload = async () => {
    heading.textContent = folder;
    await fresh();
    let files;
    try {
      files = await api('GET', storagePath('m', folder));
    } catch (err) {
      list.replaceChildren(h('li', { class: 'alert', role: 'alert' }, describe(err)));
      return;
    }
    const folders = new Set();
    const cards = [];
    for (const file of files) {
      const key = file.key.replace(/^\//, '');
      const rest = key.slice(folder.length);
      const slash = rest.indexOf('/');
      if (slash >= 0) folders.add(rest.slice(0, slash + 1));
      else cards.push(fileCard({ ...file, key }, rest, reload, announce));
    }
    const folderItems = [...folders]
      .sort()
      .map((f) =>
        h(
          'li',
          { class: 'folder card' },
          h('button', { type: 'button', class: 'secondary', onclick: () => open(folder + f) }, `Folder ${f}`),
        ),
      );
    list.replaceChildren(...folderItems, ...cards);
    if (folderItems.length + cards.length === 0)
      list.replaceChildren(h('li', { class: 'empty' }, 'This folder is empty.'));
  };
  const open = async (path) => {
    folder = path.endsWith('/') ? path : `${path}/`;
    folderInput.value = folder;
    announce('');
    fillTargets();
    await reload();
  };

  const folderForm = form(
    { 'aria-label': 'Open a folder', class: 'inline' },
    [field('Folder', { name: 'folder', value: folder, required: true, spellcheck: 'false' })],
    'Open',
    async (v) => {
      await open(v.folder.replace(/^\/+/, ''));
    },
    [
      h(
        'button',
        { type: 'button', class: 'secondary', onclick: () => open(folder.replace(/[^/]+\/$/, '') || home) },
        'Up',
      ),
      h('button', { type: 'button', class: 'secondary', onclick: () => open(home) }, 'My folder'),
    ],
  );
  const folderInput = folderForm.querySelector('input');

  // Where the upload goes: a folder the rules allow (the open one when they do).
  const targetId = 'upload-target';
  const target = h('select', { id: targetId, name: 'target', required: true });
  const fillTargets = () => {
    const choices = writable.map((w) => w.folder);
    if (writableIn(folder, writable) && !choices.includes(folder)) choices.unshift(folder);
    target.replaceChildren(...choices.map((c) => h('option', { value: c }, c)));
    target.value = uploadFolder(folder, writable) ?? '';
  };
  fillTargets();

  const upload = form(
    { 'aria-label': 'Upload a file', class: 'inline' },
    [
      field('File', { name: 'file', type: 'file', required: true }),
      h('div', { class: 'field' }, h('label', { for: targetId }, 'Save in'), target),
      field('Save as', { name: 'name', placeholder: 'the file’s own name', spellcheck: 'false' }),
    ],
    'Upload',
    async (v, el) => {
      const file = v.file;
      const name = (v.name || file.name).replace(/^\/+/, '');
      const into = v.target;
      const body = new FormData();
      body.append('file', file, file.name);
      await fresh();
      try {
        await api('POST', storagePath('o', into + name), body);
      } catch (err) {
        // The service says what refused; the page adds where this person may write instead.
        if (err?.code === 'FORBIDDEN') throw new Error(`${describe(err)} ${whereToWrite(writable)}`);
        throw err;
      }
      el.reset();
      if (into === folder) await reload();
      else await open(into);
      fillTargets();
      return `Uploaded ${name} to ${into}.`;
    },
  );

  await reload();
  return h(
    'div',
    { class: 'page' },
    h('h1', { tabindex: '-1' }, 'Files'),
    h('p', { class: 'intro' }, whereToWrite(writable)),
    h('div', { class: 'columns' }, section('Folder', folderForm), section('Upload', upload)),
    h('section', { class: 'listing', 'aria-labelledby': 'folder-heading' }, heading, status, list),
  );
}
