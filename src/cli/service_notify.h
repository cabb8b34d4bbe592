// systemd's service notifications (sd_notify(3)) without libsystemd: one datagram to the socket
// named by $NOTIFY_SOCKET, which a unit with Type=notify sets. Nothing happens without it.
#pragma once

#include <string>

namespace execbox::cli {

// Sends `state` ("READY=1", "RELOADING=1\nMONOTONIC_USEC=...", "STOPPING=1", "STATUS=...").
// Best effort: a service manager that went away must not stop the server.
void NotifyServiceManager(const std::string& state);

// "RELOADING=1" with the MONOTONIC_USEC systemd asks to come with it.
std::string ReloadingState();

}  // namespace execbox::cli
