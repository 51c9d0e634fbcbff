#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
/// @file apgas.hpp
/// The whole public API of apgas: places, activities, finish, at, atomic/when, clocks, start-up.
/// See docs/architecture.md for how the pieces fit and docs/decisions/ for why they are so.

#include <apgas/activity.hpp>
#include <apgas/atomic.hpp>
#include <apgas/clock.hpp>
#include <apgas/global.hpp>
#include <apgas/pinned.hpp>
#include <apgas/queue.hpp>
#include <apgas/error.hpp>
#include <apgas/place.hpp>
#include <apgas/reducer.hpp>
#include <apgas/runtime.hpp>
#include <apgas/team.hpp>
#pragma GCC visibility pop
