// A handful of pages, so a tiny history router instead of a dependency: the path below /admin/ names the page, and
// the server answers every such path with index.html (AdminConsoleServlet's SPA fallback), so reloads and links
// work. `admin: true` marks a page only an admin key may use (its API answers a tenant key 403): the nav leaves it
// out for a tenant, and the page itself says so when a tenant opens its address.
import { ref } from 'vue';

export const BASE = '/admin/';
export const PAGES = [
  { id: 'dashboard', title: 'Dashboard' },
  { id: 'executions', title: 'Executions' },
  { id: 'jobs', title: 'Jobs' },
  { id: 'workspaces', title: 'Workspaces' },
  { id: 'packages', title: 'Packages', admin: true },
  { id: 'playground', title: 'Playground' },
  { id: 'chat', title: 'Chat' },
];

function pageOf(pathname) {
  const rest = pathname.startsWith(BASE) ? pathname.slice(BASE.length) : '';
  const id = rest.split('/')[0];
  return PAGES.some((p) => p.id === id) ? id : 'dashboard';
}

export const route = ref(pageOf(window.location.pathname));

export function navigate(id) {
  if (route.value === id) return;
  window.history.pushState({}, '', `${BASE}${id}`);
  route.value = id;
}

window.addEventListener('popstate', () => {
  route.value = pageOf(window.location.pathname);
});
