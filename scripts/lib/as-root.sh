# Sourced by scripts/run.sh and scripts/test.sh, which need root: they install packages with apt-get, and the root
# server gives every sandbox a host uid and a cgroup of its own.
#
#   as_root SCRIPT [ARGS...]
#
# Returns at once when already root (a root shell, a container: no sudo needed). Otherwise runs SCRIPT again
# through sudo with the caller's environment (JAVA_HOME, the server's variables such as EGRESS or PORT, AOT_CACHE)
# but root's own HOME and PATH and without the login's session variables; without sudo it stops, saying so.
as_root() {
  [ "$(id -u)" = 0 ] && return 0
  local script=$1 name
  shift
  if ! command -v sudo >/dev/null 2>&1; then
    echo "${script##*/}: needs root (it installs packages with apt-get, and the root server gives every sandbox a" \
      "host uid and a cgroup of its own), and sudo is not installed: run it from a root shell" \
      "(the server without root, for a desktop client: docs/desktop.md)" >&2
    exit 1
  fi
  local keep=()
  while IFS= read -r name; do
    case "$name" in
      HOME | USER | LOGNAME | USERNAME | SHELL | MAIL | PATH | PWD | OLDPWD | SHLVL | _ | SUDO_* | XDG_* | DBUS_* | \
        SSH_* | DISPLAY | WAYLAND_* | XAUTHORITY | LD_* | BASH_ENV | ENV) ;;
      *) keep+=("$name=${!name}") ;;
    esac
  done < <(compgen -e)
  echo "${script##*/}: not root: running it again through sudo" >&2
  exec sudo -- env "${keep[@]}" "$script" "$@"
}
